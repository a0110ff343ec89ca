//! Forgetting and consolidation on 1,000,000 memories (1,000 users × 1,000, 384 dimensions),
//! run by the background worker as in production: the time of each pass and the longest any
//! single batch held its transaction (and so its row locks). Beside them, the baseline: the
//! same work as single SQL statements (run in a transaction that is rolled back), which hold
//! their locks for the whole statement. Run through `bench/run.sh maintain`.
//!
//! Each user's 1,000 memories: 10 protected hard facts; 150 past their `expires_at`; 100 retired
//! 40 days ago (past the regret window); 60 facts in 20 groups of 3 duplicates by (predicate,
//! object); 20 pairs of near-duplicate paraphrases; 40 episodes 40 days old about 4 subjects;
//! 50 one-off items 40 days old, never recalled; and 550 ordinary memories from the last 25
//! days with some recalls.
//!
//! `BENCH_LOAD_ONLY=1` stops after loading; `BENCH_STOP_BEFORE_FORGET=1` after the
//! consolidation pass, leaving the database as the forgetting pass would find it (to copy the
//! stopped server's data directory and run that pass again on the same state).

use std::time::{Duration, Instant, SystemTime};

use agent_memory_bench::{centers, clustered, table};
use agent_memory_tests::{alter_system as configure, worker_database, Rng};
use pgvector::Vector;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;
use postgres::Client;

const DB: &str = "am_bench_maintain";
const DIMS: usize = 384;
const DAY: Duration = Duration::from_secs(86_400);

fn users() -> usize {
    std::env::var("BENCH_USERS").ok().and_then(|s| s.parse().ok()).unwrap_or(1000)
}

fn load(c: &mut Client, n_users: usize) -> Duration {
    let mut rng = Rng(42);
    let cs = centers(&mut rng, 40, DIMS);
    let now = SystemTime::now();
    let vtype: Type = c.prepare("SELECT $1::vector").unwrap().params()[0].clone();
    let types = [
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        vtype,
        Type::TEXT,
        Type::FLOAT4,
        Type::BOOL,
        Type::BOOL,
        Type::TEXT,
        Type::TIMESTAMPTZ,
        Type::TIMESTAMPTZ,
        Type::TIMESTAMPTZ,
        Type::TIMESTAMPTZ,
        Type::INT4,
    ];
    let t = Instant::now();
    let sink = c
        .copy_in(
            "COPY agent_memory.memories (user_id, kind, subject, predicate, object, content, emb, embedding_model, importance, protected, \
             active, retired_reason, retired_at, expires_at, created_at, last_hit_at, hit_count) FROM STDIN BINARY",
        )
        .unwrap();
    let mut w = BinaryCopyInWriter::new(sink, &types);
    for u in 0..n_users {
        let user = format!("user-{u:04}");
        let mut previous: Vec<f32> = Vec::new();
        for i in 0..1000usize {
            let mut kind = "semantic";
            let (mut subject, mut predicate, mut object): (Option<String>, Option<String>, Option<String>) = (None, None, None);
            let mut content = format!("memory {i} of {user}: {}", rng.next_u64() % 100_000);
            let mut emb = clustered(&mut rng, &cs, 0.6);
            let mut importance = 0.2 + (rng.next_u64() % 60) as f32 / 100.0;
            let (mut protected, mut active) = (false, true);
            let (mut retired_reason, mut retired_at): (Option<&str>, Option<SystemTime>) = (None, None);
            let mut expires_at: Option<SystemTime> = None;
            let mut created = now - Duration::from_secs(rng.next_u64() % (25 * 86_400));
            let mut last_hit = created + Duration::from_secs(rng.next_u64() % 3600);
            let mut hits = 1 + (rng.next_u64() % 20) as i32;
            match i {
                0..=9 => {
                    (subject, predicate, object) = (Some("user".into()), Some(format!("hard_{i}")), Some("fact".into()));
                    protected = true;
                    importance = 0.9;
                }
                10..=159 => expires_at = Some(now - DAY),
                160..=259 => {
                    active = false;
                    retired_reason = Some("superseded");
                    retired_at = Some(now - 40 * DAY);
                }
                260..=319 => {
                    let g = (i - 260) / 3;
                    (subject, predicate, object) =
                        (Some(format!("s{}", (i - 260) % 3)), Some(format!("pref_{g}")), Some(format!("value {g}")));
                    content = format!("Prefers value {g} for pref {g}");
                }
                // A paraphrase of the previous memory: a near-duplicate embedding.
                320..=359 if i % 2 == 1 => emb = previous.iter().map(|x| x + 0.002 * rng.f32()).collect(),
                360..=399 => {
                    kind = "episodic";
                    subject = Some(format!("episode {}", (i - 360) / 10));
                    content = format!("Fragment {} of episode {}: something happened.", i % 10, (i - 360) / 10);
                    created = now - 40 * DAY;
                    last_hit = created;
                    hits = 0;
                    expires_at = Some(now + 30 * DAY);
                }
                400..=449 => {
                    created = now - 40 * DAY;
                    last_hit = created;
                    hits = 0;
                }
                _ => {}
            }
            previous = emb.clone();
            w.write(&[
                &user,
                &kind,
                &subject,
                &predicate,
                &object,
                &content,
                &Vector::from(emb),
                &"bench-384",
                &importance,
                &protected,
                &active,
                &retired_reason,
                &retired_at,
                &expires_at,
                &created,
                &last_hit,
                &hits,
            ])
            .unwrap();
        }
    }
    w.finish().unwrap();
    t.elapsed()
}

/// `n` new ordinary memories for every user: a day of conversations after the first passes.
fn add_new(c: &mut Client, n_users: usize, n: usize) -> Duration {
    let mut rng = Rng(4242);
    let cs = centers(&mut rng, 40, DIMS);
    let vtype: Type = c.prepare("SELECT $1::vector").unwrap().params()[0].clone();
    let t = Instant::now();
    let sink = c.copy_in("COPY agent_memory.memories (user_id, content, emb, embedding_model, importance) FROM STDIN BINARY").unwrap();
    let mut w = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::TEXT, vtype, Type::TEXT, Type::FLOAT4]);
    for u in 0..n_users {
        let user = format!("user-{u:04}");
        for i in 0..n {
            let importance = 0.2 + (rng.next_u64() % 60) as f32 / 100.0;
            w.write(&[
                &user,
                &format!("new memory {i} of {user}"),
                &Vector::from(clustered(&mut rng, &cs, 0.6)),
                &"bench-384",
                &importance,
            ])
            .unwrap();
        }
    }
    w.finish().unwrap();
    t.elapsed()
}

/// Times a statement run in a transaction that is rolled back: a baseline that changes nothing.
fn rolled_back(c: &mut Client, sql: &str) -> (Duration, u64) {
    let mut tx = c.transaction().unwrap();
    let t = Instant::now();
    let n = tx.execute(sql, &[]).unwrap();
    let d = t.elapsed();
    tx.rollback().unwrap();
    (d, n)
}

struct Run {
    seconds: f64,
    longest_ms: f64,
    steps: String,
    step_ms: String,
    /// WAL the server wrote during the pass (`pg_stat_wal`: the worker, its helper, and this
    /// client's polling): bytes, and full-page images.
    wal_bytes: f64,
    wal_fpi: i64,
}

/// The server's WAL written so far: bytes and full-page images.
fn wal_written(c: &mut Client) -> (f64, i64) {
    let r = c.query_one("SELECT wal_bytes::float8, wal_fpi FROM pg_catalog.pg_stat_wal", &[]).unwrap();
    (r.get(0), r.get(1))
}

/// Lets the worker run `job` once (its interval set to one second), and reads its run row.
fn worker_pass(c: &mut Client, job: &str) -> Run {
    let before: i64 = c.query_one("SELECT coalesce(max(id), 0) FROM agent_memory.runs", &[]).unwrap().get(0);
    let interval = if job == "forget" { "forget_interval" } else { "consolidate_interval" };
    let (bytes_before, fpi_before) = wal_written(c);
    configure(c, &[(interval, "1s")]);
    let start = Instant::now();
    let row = loop {
        if let Some(r) = c
            .query_opt(
                "SELECT extract(epoch FROM finished_at - started_at)::float8, coalesce(longest_batch_ms, 0), steps::text, status, error, step_ms::text \
                   FROM agent_memory.runs WHERE id > $1 AND job = $2 AND by_worker AND status <> 'running' ORDER BY id LIMIT 1",
                &[&before, &job],
            )
            .unwrap()
        {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(600), "the worker ran no {job} pass");
        std::thread::sleep(Duration::from_millis(200));
    };
    configure(c, &[(interval, "1h")]);
    // The worker publishes its statistics before it sleeps, just after the run row.
    std::thread::sleep(Duration::from_millis(1500));
    let (bytes_after, fpi_after) = wal_written(c);
    let status: String = row.get(3);
    assert_eq!(status, "succeeded", "the {job} pass failed: {:?}", row.get::<_, Option<String>>(4));
    Run {
        seconds: row.get(0),
        longest_ms: row.get(1),
        steps: row.get(2),
        step_ms: row.get(5),
        wal_bytes: bytes_after - bytes_before,
        wal_fpi: fpi_after - fpi_before,
    }
}

fn timed(c: &mut Client, sql: &str) -> (f64, String) {
    let t = Instant::now();
    let rows = c.query(sql, &[]).unwrap();
    let d = t.elapsed().as_secs_f64();
    let steps: Vec<String> = rows.iter().map(|r| format!("{} {}", r.get::<_, String>(0), r.get::<_, i64>(1))).collect();
    (d, steps.join(", "))
}

fn main() {
    let n_users = users();
    let mut c = worker_database(DB);
    configure(&mut c, &[("forget_interval", "1h"), ("consolidate_interval", "1h"), ("workers_enabled", "on")]);
    println!("Loading {} memories ({n_users} users × 1,000, {DIMS} dimensions)...", n_users * 1000);
    let load_time = load(&mut c, n_users);
    c.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();
    let total: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories", &[]).unwrap().get(0);
    println!("loaded {total} rows in {:.1} s", load_time.as_secs_f64());
    if std::env::var("BENCH_LOAD_ONLY").is_ok() {
        return;
    }

    // Dry runs: what each pass would change.
    let (dry_c, dry_c_steps) = timed(&mut c, "SELECT * FROM agent_memory.memory_consolidate(dry_run => true)");
    let (dry_f, dry_f_steps) = timed(&mut c, "SELECT * FROM agent_memory.memory_forget(dry_run => true)");

    // Baselines: the same kind of work as one statement each, rolled back.
    let (base_dedupe, base_dedupe_n) = rolled_back(
        &mut c,
        "UPDATE agent_memory.memories m SET active = false, retired_reason = 'merged', retired_at = now() \
          WHERE m.id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY user_id, predicate, object ORDER BY created_at DESC, id DESC) AS rn \
                                           FROM agent_memory.memories WHERE active AND predicate IS NOT NULL AND object IS NOT NULL) d WHERE rn > 1)",
    );
    let (base_forget, base_forget_n) = rolled_back(
        &mut c,
        "WITH e AS (UPDATE agent_memory.memories SET active = false, retired_reason = 'expired', retired_at = now() \
                     WHERE active AND NOT protected AND least(expires_at, valid_until) <= now() RETURNING id) \
         UPDATE agent_memory.memories m SET active = false, retired_reason = 'evicted', retired_at = now() \
          WHERE m.id IN (SELECT id FROM (SELECT id, protected, row_number() OVER (PARTITION BY user_id ORDER BY protected DESC, importance DESC, last_hit_at DESC) AS rn \
                                           FROM agent_memory.memories WHERE active AND coalesce(least(expires_at, valid_until) > now(), true)) r \
                          WHERE rn > 400 AND NOT protected)",
    );
    c.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();

    // The passes, by the worker, consolidation first (it only retires and archives), then
    // forgetting.
    let cons = worker_pass(&mut c, "consolidate");
    if std::env::var("BENCH_STOP_BEFORE_FORGET").is_ok() {
        return;
    }
    let forget = worker_pass(&mut c, "forget");
    // Second passes by hand: the steady state, with little left to do.
    let (again_c, again_c_steps) = timed(&mut c, "SELECT * FROM agent_memory.memory_consolidate()");
    let (again_f, again_f_steps) = timed(&mut c, "SELECT * FROM agent_memory.memory_forget()");
    // A day later: 50 new memories per user, and the next forgetting pass by the worker.
    add_new(&mut c, n_users, 50);
    let daily = worker_pass(&mut c, "forget");
    configure(&mut c, &[("forget_interval", "10min"), ("consolidate_interval", "1d")]);

    println!("consolidation, ms per step: {}\nforgetting, ms per step: {}", cons.step_ms, forget.step_ms);
    let mut out = format!("## Forgetting and consolidation on {total} memories ({n_users} users × 1,000, {DIMS} dimensions)\n\n");
    out += &format!("Load (COPY, with the write trigger): {:.1} s.\n\n", load_time.as_secs_f64());
    let rows = vec![
        vec![
            "consolidation pass (worker)".into(),
            format!("{:.2}", cons.seconds),
            format!("{:.0}", cons.longest_ms),
            cons.steps.clone(),
            "≤ 20 s".into(),
        ],
        vec![
            "forgetting pass (worker)".into(),
            format!("{:.2}", forget.seconds),
            format!("{:.0}", forget.longest_ms),
            forget.steps.clone(),
            "≤ 10 s".into(),
        ],
        vec![
            format!("forgetting pass after {} new memories (worker)", n_users * 50),
            format!("{:.2}", daily.seconds),
            format!("{:.0}", daily.longest_ms),
            daily.steps.clone(),
            "".into(),
        ],
        vec!["consolidation dry run".into(), format!("{dry_c:.2}"), "no locks".into(), dry_c_steps, "".into()],
        vec!["forgetting dry run".into(), format!("{dry_f:.2}"), "no locks".into(), dry_f_steps, "".into()],
        vec!["second consolidation pass (by hand)".into(), format!("{again_c:.2}"), "one transaction".into(), again_c_steps, "".into()],
        vec!["second forgetting pass (by hand)".into(), format!("{again_f:.2}"), "one transaction".into(), again_f_steps, "".into()],
        vec![
            "baseline: dedupe as one UPDATE".into(),
            format!("{:.2}", base_dedupe.as_secs_f64()),
            format!("{:.0} (all rows, whole statement)", base_dedupe.as_secs_f64() * 1000.0),
            format!("{base_dedupe_n} rows"),
            "".into(),
        ],
        vec![
            "baseline: expiry + capacity as one UPDATE".into(),
            format!("{:.2}", base_forget.as_secs_f64()),
            format!("{:.0} (all rows, whole statement)", base_forget.as_secs_f64() * 1000.0),
            format!("{base_forget_n} rows evicted (+ expired)"),
            "".into(),
        ],
    ];
    out += &table(&["what", "seconds", "longest lock hold (ms)", "rows per step", "target"], &rows);
    out += &format!("\nMilliseconds per step: consolidation {}; forgetting {}.\n", cons.step_ms, forget.step_ms);
    let wal = |r: &Run| format!("{:.0} MB, {} full-page images", r.wal_bytes / 1e6, r.wal_fpi);
    let wal_line = format!(
        "WAL written during each worker pass: consolidation {}; forgetting {}; the next forgetting pass {}.\n",
        wal(&cons),
        wal(&forget),
        wal(&daily)
    );
    print!("{wal_line}");
    out += &wal_line;
    let met = |s: f64, t: f64| if s <= t { "met" } else { "NOT met" };
    let verdict = format!(
        "\nforgetting {:.2} s (target ≤ 10 s: {}), consolidation {:.2} s (target ≤ 20 s: {}); longest batch {:.0} ms\n",
        forget.seconds,
        met(forget.seconds, 10.0),
        cons.seconds,
        met(cons.seconds, 20.0),
        forget.longest_ms.max(cons.longest_ms)
    );
    print!("{verdict}");
    out += &verdict;
    if let Ok(path) = std::env::var("BENCH_OUT") {
        std::fs::write(path, out).unwrap();
    }
}
