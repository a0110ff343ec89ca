//! Throughput of the read path under many clients: 200 users × 1,000 memories of 512 dimensions,
//! written interleaved (as the traffic of many users writes them) and packed, then 1, 2, 8 and
//! 32 connections each running a mix of 90% reads and 10% reconciles for a fixed time. The reads
//! are `memory_recall` (vector), `memory_recall` with `query_text` (hybrid) and `memory_context`,
//! each in three modes, in the same run:
//!
//! * `touch off`: `touch => false`, the reads' floor;
//! * `hits folded`: the default touch, with the background worker running in the database, so
//!   the hits go to shared memory and the worker folds them (0.8.0);
//! * `touch in place`: the default touch with the workers disabled (`workers_enabled = off`), so
//!   each read updates the rows it returns: what every recall did before 0.8.0 — the baseline.
//!
//! Printed per cell: calls per second (reads and reconciles), the reads' p50 and p99, and
//! separately the WAL bytes per read (one connection, 1,000 reads, nothing else running).
//! Conditions: the bench server of `bench/run.sh` (its worker serves this database), packs built
//! and the table vacuumed before the first cell. Run through `bench/run.sh throughput`;
//! BENCH_SECONDS sets each cell's length (default 8), BENCH_SCALE the number of users.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_memory_bench::{centers, clustered, percentile_ms, table};
use agent_memory_tests::{alter_system, connect, explain_analyze_wal, reset_system, worker_database, Rng};
use pgvector::Vector;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;
use postgres::Client;

const DB: &str = "am_bench_throughput";
const MODEL: &str = "m512";
const DIMS: usize = 512;
const PER_USER: usize = 1000;
const CONNECTIONS: [usize; 4] = [1, 2, 8, 32];

/// Syllables of the generated vocabulary: 8,000 words, drawn log-uniformly (a few common words,
/// a long tail), so that a query's words match a few memories of a user, as in real text.
const SYLLABLES: [&str; 20] =
    ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pa", "de", "go", "bu", "fe", "ji", "wa", "zo", "ri", "ha", "su", "ni"];
const VOCABULARY: u64 = 8000;

fn users() -> usize {
    let s: f64 = std::env::var("BENCH_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0);
    ((200.0 * s).round() as usize).max(2)
}

fn seconds() -> Duration {
    Duration::from_secs_f64(std::env::var("BENCH_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(8.0))
}

fn word(rng: &mut Rng) -> String {
    let u = (rng.next_u64() % 1_000_000) as f64 / 1_000_000.0;
    let i = ((VOCABULARY as f64).powf(u) as u64).min(VOCABULARY - 1) as usize;
    format!("{}{}{}", SYLLABLES[i % 20], SYLLABLES[(i / 20) % 20], SYLLABLES[(i / 400) % 20])
}

fn words(rng: &mut Rng, n: usize) -> String {
    (0..n).map(|_| word(rng)).collect::<Vec<_>>().join(" ")
}

fn user(i: usize) -> String {
    format!("t{i:04}")
}

/// Creates the database and loads the memories interleaved by binary COPY; packs and vacuums.
fn load(n_users: usize) -> Duration {
    // The worker stays connected to its database: the extension is made again, not the database.
    let mut c = worker_database(DB);
    let t = Instant::now();
    let vtype: Type = c.prepare("SELECT $1::vector").unwrap().params()[0].clone();
    let mut rng = Rng(7);
    let cs = centers(&mut rng, 200, DIMS);
    let sink =
        c.copy_in("COPY agent_memory.memories (user_id, kind, content, emb, embedding_model, importance) FROM STDIN BINARY").unwrap();
    let types = [Type::TEXT, Type::TEXT, Type::TEXT, vtype, Type::TEXT, Type::FLOAT4];
    let mut w = BinaryCopyInWriter::new(sink, &types);
    for i in 0..PER_USER {
        for u in 0..n_users {
            let emb = Vector::from(clustered(&mut rng, &cs, 0.8));
            let kind = if i % 3 == 0 { "episodic" } else { "semantic" };
            let content = format!("Memory {i}: {}", words(&mut rng, 14));
            let importance = (rng.next_u64() % 101) as f32 / 100.0;
            w.write(&[&user(u), &kind, &content, &emb, &MODEL, &importance]).unwrap();
        }
    }
    w.finish().unwrap();
    for u in 0..n_users {
        c.execute("SELECT agent_memory.memory_pack($1, $2)", &[&user(u), &MODEL]).unwrap();
    }
    c.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();
    t.elapsed()
}

#[derive(Clone, Copy, PartialEq)]
enum Call {
    Vector,
    Hybrid,
    Context,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Vector => "memory_recall (vector)",
            Call::Hybrid => "memory_recall (hybrid)",
            Call::Context => "memory_context",
        }
    }

    fn sql(self, touch: bool) -> String {
        match self {
            Call::Vector => format!("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => '{MODEL}', touch => {touch})"),
            Call::Hybrid => format!(
                "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => '{MODEL}', query_text => $3, touch => {touch})"
            ),
            Call::Context => format!(
                "SELECT memory_id FROM agent_memory.memory_context($1, 'session', $2::vector, model => '{MODEL}', query_text => $3, \
                 token_budget => 1000, touch => {touch})"
            ),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Off,
    Folded,
    InPlace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Off => "touch off",
            Mode::Folded => "hits folded (0.8.0)",
            Mode::InPlace => "touch in place (before 0.8.0)",
        }
    }
}

/// Sets the workers on or off and waits until this database's recalls defer their hits (or not).
fn set_mode(c: &mut Client, mode: Mode) {
    let on = mode != Mode::InPlace;
    alter_system(c, &[("workers_enabled", if on { "on" } else { "off" })]);
    let t = Instant::now();
    loop {
        let deferred: bool = c.query_one("SELECT deferred FROM agent_memory.memory_hit_stats()", &[]).unwrap().get(0);
        if deferred == on {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "the worker did not switch folding {}", if on { "on" } else { "off" });
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Cell {
    reads: usize,
    writes: usize,
    elapsed: Duration,
    lat: Vec<Duration>,
}

/// `clients` connections for `seconds()`, each doing 9 reads to 1 reconcile.
fn run_cell(call: Call, mode: Mode, clients: usize, n_users: usize, seed: u64) -> Cell {
    let stop = AtomicBool::new(false);
    let ready = std::sync::Barrier::new(clients + 1);
    let cs = centers(&mut Rng(7), 200, DIMS);
    let mut start = Instant::now();
    let results: Vec<(usize, usize, Vec<Duration>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|k| {
                let (stop, cs, ready) = (&stop, &cs, &ready);
                scope.spawn(move || {
                    let mut c = connect(DB);
                    let read = c.prepare(&call.sql(mode != Mode::Off)).unwrap();
                    let write = c
                        .prepare(&format!(
                            "SELECT action FROM agent_memory.memory_reconcile($1, $2, 'prefers', $3, $4, $5::vector, model => '{MODEL}')"
                        ))
                        .unwrap();
                    let mut rng = Rng(seed * 1000 + k as u64);
                    // A new connection's first calls load what a backend keeps (the token
                    // counter's tables, plans): not part of the measurement.
                    for _ in 0..3 {
                        let u = user((rng.next_u64() % n_users as u64) as usize);
                        let v = Vector::from(clustered(&mut rng, cs, 0.8));
                        if call == Call::Vector {
                            c.query(&read, &[&u, &v]).unwrap();
                        } else {
                            c.query(&read, &[&u, &v, &words(&mut rng, 3)]).unwrap();
                        }
                    }
                    ready.wait();
                    let (mut reads, mut writes, mut lat) = (0, 0, Vec::new());
                    while !stop.load(Ordering::Relaxed) {
                        let u = user((rng.next_u64() % n_users as u64) as usize);
                        let v = Vector::from(clustered(&mut rng, cs, 0.8));
                        if rng.next_u64().is_multiple_of(10) {
                            let subject = format!("topic {}", rng.next_u64() % 20);
                            let object = words(&mut rng, 2);
                            let content = format!("{u} prefers {object} for {subject}");
                            c.query(&write, &[&u, &subject, &object, &content, &v]).unwrap();
                            writes += 1;
                        } else {
                            let text = words(&mut rng, 3);
                            let t = Instant::now();
                            if call == Call::Vector {
                                c.query(&read, &[&u, &v]).unwrap();
                            } else {
                                c.query(&read, &[&u, &v, &text]).unwrap();
                            }
                            lat.push(t.elapsed());
                            reads += 1;
                        }
                    }
                    (reads, writes, lat)
                })
            })
            .collect();
        ready.wait();
        start = Instant::now();
        std::thread::sleep(seconds());
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = start.elapsed();
    let mut lat: Vec<Duration> = results.iter().flat_map(|r| r.2.iter().copied()).collect();
    lat.sort();
    Cell { reads: results.iter().map(|r| r.0).sum(), writes: results.iter().map(|r| r.1).sum(), elapsed, lat }
}

/// The WAL bytes one statement wrote in this backend, by EXPLAIN's own count (what the worker,
/// autovacuum or a checkpoint write meanwhile is not in it).
fn wal_bytes(c: &mut Client, sql: &str) -> i64 {
    explain_analyze_wal(c, sql)["WAL Bytes"].as_i64().unwrap()
}

/// WAL bytes per read: one connection, `n` reads, each measured in its own backend after a
/// checkpoint (so a row's first change after it logs its whole page); and, per read, the WAL of
/// the fold of those reads' hits afterwards (the worker's folds held back meanwhile).
fn wal_per_read(c: &mut Client, call: Call, mode: Mode, n: usize, n_users: usize) -> (f64, f64) {
    let cs = centers(&mut Rng(7), 200, DIMS);
    let mut rng = Rng(99);
    alter_system(c, &[("hit_fold_interval", "1h")]);
    std::thread::sleep(Duration::from_millis(300));
    c.batch_execute("SELECT agent_memory.memory_fold_hits()").unwrap();
    // Dead versions the timed cells' reconciles left would otherwise be pruned by the first
    // read of their page (PostgreSQL's own pruning on read, WAL of its own): vacuum first.
    c.batch_execute("VACUUM agent_memory.memories").unwrap();
    c.batch_execute("CHECKPOINT").unwrap();
    let mut total = 0;
    for _ in 0..n {
        let u = user((rng.next_u64() % n_users as u64) as usize);
        let v = clustered(&mut rng, &cs, 0.8);
        let v = format!("'[{}]'", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","));
        let sql = call
            .sql(mode != Mode::Off)
            .replace("$1", &format!("'{u}'"))
            .replace("$2", &v)
            .replace("$3", &format!("'{}'", words(&mut rng, 3)));
        total += wal_bytes(c, &sql);
    }
    let fold = wal_bytes(c, "SELECT agent_memory.memory_fold_hits()");
    reset_system(c, &["hit_fold_interval"]);
    (total as f64 / n as f64, fold as f64 / n as f64)
}

fn main() {
    let n_users = users();
    let loaded = load(n_users);
    let mut c = connect(DB);
    // The worker folds every 2 s (the default) and repacks changed users every 10 s.
    alter_system(&mut c, &[("pack_interval", "10")]);
    let mut notes = vec![
        format!(
            "- {} users × {PER_USER} memories of {DIMS} dimensions, written interleaved by COPY, packed and vacuumed in {:.1} s",
            n_users,
            loaded.as_secs_f64()
        ),
        format!(
            "- each cell: {:.0} s, every connection doing 9 reads to 1 memory_reconcile (a keyed fact: supersedes)",
            seconds().as_secs_f64()
        ),
        format!(
            "- {} cores; the worker folds hits every 2 s and repacks changed users every 10 s",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
        ),
    ];
    let mut rows = Vec::new();
    let mut wal_rows = Vec::new();
    let mut seed = 1;
    for call in [Call::Vector, Call::Hybrid, Call::Context] {
        // WAL per read, one connection, nothing else running.
        let mut wal = Vec::new();
        for mode in [Mode::Off, Mode::Folded, Mode::InPlace] {
            set_mode(&mut c, mode);
            wal.push(wal_per_read(&mut c, call, mode, 1000, n_users));
        }
        wal_rows.push(vec![
            call.name().to_string(),
            format!("{:.0}", wal[0].0),
            format!("{:.0} (+ {:.0} folding)", wal[1].0, wal[1].1),
            format!("{:.0}", wal[2].0),
        ]);
        for clients in CONNECTIONS {
            let mut per_mode = Vec::new();
            // The modes in turn for each connection count, so a slow moment of the machine falls
            // on neighbouring cells.
            for mode in [Mode::Off, Mode::Folded, Mode::InPlace] {
                set_mode(&mut c, mode);
                seed += 1;
                let cell = run_cell(call, mode, clients, n_users, seed);
                per_mode.push((mode, cell));
            }
            let off_rate = per_mode[0].1.reads as f64 / per_mode[0].1.elapsed.as_secs_f64();
            for (mode, cell) in &per_mode {
                let rate = cell.reads as f64 / cell.elapsed.as_secs_f64();
                rows.push(vec![
                    call.name().to_string(),
                    clients.to_string(),
                    mode.name().to_string(),
                    format!("{rate:.0}"),
                    format!("{:.0}", cell.writes as f64 / cell.elapsed.as_secs_f64()),
                    format!("{:.2}", rate / off_rate),
                    format!("{:.2}", percentile_ms(&cell.lat, 0.5)),
                    format!("{:.2}", percentile_ms(&cell.lat, 0.99)),
                ]);
                eprintln!("{} {clients} {}: {rate:.0} reads/s", call.name(), mode.name());
            }
        }
    }
    set_mode(&mut c, Mode::Folded);
    reset_system(&mut c, &["workers_enabled", "pack_interval"]);
    let dropped: i64 = c.query_one("SELECT dropped FROM agent_memory.memory_hit_stats()", &[]).unwrap().get(0);
    notes.push(format!("- hits dropped (buffer full) over the whole run: {dropped}"));
    let mut out = String::from("## Throughput: 90% reads, 10% reconciles\n\n");
    for n in &notes {
        out += n;
        out.push('\n');
    }
    out.push('\n');
    out += &table(&["call", "connections", "mode", "reads/s", "reconciles/s", "× touch off", "p50 ms", "p99 ms"], &rows);
    out += "\nWAL bytes per read (one connection, 1,000 reads, nothing else running; after a VACUUM and a checkpoint, so a first change of a page after it is a full page image; the worker's fold of those reads' hits afterwards, per read, in brackets):\n\n";
    out += &table(&["call", "touch off", "hits folded (0.8.0)", "touch in place (before 0.8.0)"], &wal_rows);
    if let Ok(path) = std::env::var("BENCH_OUT") {
        std::fs::write(path, out).unwrap();
    }
}
