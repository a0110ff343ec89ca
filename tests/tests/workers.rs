//! The background workers against a real server started with the library preloaded
//! (`scripts/test.sh` sets `agent_memory.worker_databases = 'agent_memory_workers'`): they run by
//! themselves and leave run rows, follow a changed interval after `pg_reload_conf()`, survive a
//! `kill -9` in the middle of a large pass without a half-done batch or a lost row, never stop
//! recall and reconcile from working during a pass, show what they run in `pg_stat_activity`,
//! and have what they change counted in `pg_stat_user_tables` while they live on; and embed the
//! memories written without an embedding (`agent_memory.embed_async`) in batches, through a
//! `kill -9` in the middle, storing each embedding once.
//!
//! Worker settings are changed with ALTER SYSTEM and a reload, as an operator would, and reset
//! at the end. The tests run one at a time (`--test-threads=1`): they share the workers.

use std::time::{Duration, Instant};

use agent_memory_tests::{alter_system, connect, explain_analyze_wal, reset_system, try_connect, worker_database, Rng};
use pgvector::Vector;
use postgres::Client;

const DB: &str = "agent_memory_workers";

fn worker_db() -> Client {
    worker_database(DB)
}

fn configure(c: &mut Client, settings: &[(&str, &str)]) {
    alter_system(c, settings);
}

fn reset_settings(c: &mut Client) {
    let names = [
        "forget_interval",
        "consolidate_interval",
        "workers_enabled",
        "capacity",
        "batch_size",
        "batch_pause",
        "forget_helper",
        "pack_interval",
        "embed_interval",
        "embed_batch_size",
        "embed_windows",
        "hit_fold_interval",
    ];
    reset_system(c, &names);
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn worker_pid(c: &mut Client) -> Option<i32> {
    c.query_opt("SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory worker' AND datname = $1", &[&DB])
        .unwrap()
        .map(|r| r.get(0))
}

fn runs(c: &mut Client, job: &str, status: &str) -> i64 {
    c.query_one("SELECT count(*) FROM agent_memory.runs WHERE job = $1 AND status = $2 AND by_worker", &[&job, &status]).unwrap().get(0)
}

/// A connection once the server has restarted after the crash that killed `killed` and accepts
/// connections again. A killed process leaves its entry in pg_stat_activity until the server
/// reinitialises shared memory, so its absence tells that the restart happened.
fn reconnect_after_crash(dbname: &str, killed: i32, timeout: Duration) -> Client {
    let start = Instant::now();
    loop {
        if let Ok(mut c) = try_connect(dbname) {
            if let Ok(row) = c.query_one("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", &[&killed]) {
                if row.get::<_, bool>(0) {
                    return c;
                }
            }
        }
        assert!(start.elapsed() < timeout, "the server did not come back within {timeout:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn workers_run_by_themselves_and_follow_a_reloaded_interval() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "on"), ("forget_interval", "1s"), ("consolidate_interval", "1s")]);
    wait_for("the worker to connect", Duration::from_secs(60), || worker_pid(&mut c).is_some());

    // Both jobs run on their own and leave succeeded run rows with their steps.
    wait_for("runs of both jobs", Duration::from_secs(30), || {
        runs(&mut c, "forget", "succeeded") >= 2 && runs(&mut c, "consolidate", "succeeded") >= 1
    });
    let row = c
        .query_one(
            "SELECT steps::text, finished_at >= started_at FROM agent_memory.runs WHERE job = 'forget' AND by_worker ORDER BY id LIMIT 1",
            &[],
        )
        .unwrap();
    let steps: serde_json::Value = serde_json::from_str(row.get::<_, &str>(0)).unwrap();
    for step in ["expire", "age_hits", "evict", "purge"] {
        assert!(steps.get(step).is_some(), "step {step} missing from {steps}");
    }
    assert!(row.get::<_, bool>(1));

    // A long interval, after a reload: no more runs.
    configure(&mut c, &[("forget_interval", "1h"), ("consolidate_interval", "1h")]);
    std::thread::sleep(Duration::from_secs(3));
    let settled = runs(&mut c, "forget", "succeeded") + runs(&mut c, "consolidate", "succeeded");
    std::thread::sleep(Duration::from_secs(4));
    let later = runs(&mut c, "forget", "succeeded") + runs(&mut c, "consolidate", "succeeded");
    assert_eq!(settled, later, "a run started although the interval is one hour");

    // Back to one second, after a reload: runs resume.
    configure(&mut c, &[("forget_interval", "1s")]);
    wait_for("runs to resume", Duration::from_secs(20), || runs(&mut c, "forget", "succeeded") >= settled + 2);

    // The view of the last runs shows them.
    let n: i64 =
        c.query_one("SELECT count(*) FROM agent_memory.last_runs WHERE job = 'forget' AND status = 'succeeded'", &[]).unwrap().get(0);
    assert!(n >= 1);
    reset_settings(&mut c);
}

const USERS: usize = 200;
const PER_USER: usize = 500;
const DIMS: usize = 8;
const CAPACITY: i64 = 50;

/// Users the concurrent recalls and reconciles work on while the pass runs.
const BUSY_USERS: [&str; 3] = ["w-0", "w-1", "w-2"];

#[test]
fn a_killed_pass_leaves_no_half_done_batch_and_loses_nothing() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off")]);
    // 100,000 memories: 200 users × 500, each user 450 above the capacity of 50.
    let mut rng = Rng(7);
    let mut copy = c
        .copy_in("COPY agent_memory.memories (user_id, content, emb, embedding_model, importance, last_hit_at, hit_count) FROM STDIN")
        .unwrap();
    let mut buf = String::new();
    for u in 0..USERS {
        for i in 0..PER_USER {
            let v: Vec<String> = rng.vector(DIMS).iter().map(|x| format!("{x:.4}")).collect();
            let importance = (rng.next_u64() % 100) as f64 / 100.0;
            let hours = rng.next_u64() % 2000;
            buf += &format!(
                "w-{u}\tmemory {i} of user {u}\t[{}]\tw8\t{importance}\t{}\t{}\n",
                v.join(","),
                format_args!("2026-01-01 00:00:00+00"),
                hours % 7
            );
        }
        if buf.len() > 1 << 20 {
            std::io::Write::write_all(&mut copy, buf.as_bytes()).unwrap();
            buf.clear();
        }
    }
    std::io::Write::write_all(&mut copy, buf.as_bytes()).unwrap();
    copy.finish().unwrap();
    let total: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories", &[]).unwrap().get(0);
    assert_eq!(total, (USERS * PER_USER) as i64);

    // One user per batch (450 evictions each), with a pause between batches: a pass of several
    // seconds, run by the worker.
    configure(
        &mut c,
        &[
            ("capacity", &CAPACITY.to_string()),
            ("batch_size", "500"),
            ("batch_pause", "40ms"),
            ("forget_interval", "1s"),
            ("consolidate_interval", "1h"),
            ("workers_enabled", "on"),
        ],
    );
    wait_for("the worker to connect", Duration::from_secs(60), || worker_pid(&mut c).is_some());
    let done_users = |c: &mut Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM (SELECT user_id FROM agent_memory.memories GROUP BY user_id HAVING count(*) FILTER (WHERE active) <= $1) d",
            &[&CAPACITY],
        )
        .unwrap()
        .get(0)
    };
    wait_for("the pass to evict a few users", Duration::from_secs(60), || done_users(&mut c) >= 10);
    assert_eq!(runs(&mut c, "forget", "running"), 1, "the pass should still be running");

    // During the pass: recall returns k rows and reconcile writes, on users the pass is
    // working through; a pass by hand is refused at once instead of overlapping.
    let mut other = connect(DB);
    let mut slowest = Duration::ZERO;
    for round in 0..20 {
        let user = BUSY_USERS[round % BUSY_USERS.len()];
        let q = Vector::from(rng.vector(DIMS));
        let t = Instant::now();
        let rows = other.query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'w8')", &[&user, &q]).unwrap();
        assert_eq!(rows.len(), 10, "recall during the pass returned {} rows", rows.len());
        let action: String = other
            .query_one(
                "SELECT action FROM agent_memory.memory_reconcile($1, 'user', 'topic', $2, $3, $4::vector, model => 'w8')",
                &[&user, &format!("topic {round}"), &format!("Talked about topic {round}"), &q],
            )
            .unwrap()
            .get(0);
        assert!(action == "ADD" || action == "UPDATE", "reconcile during the pass: {action}");
        slowest = slowest.max(t.elapsed());
    }
    println!("slowest recall + reconcile during the pass: {slowest:?}");
    let err = other.query("SELECT * FROM agent_memory.memory_forget()", &[]).unwrap_err();
    assert_eq!(err.code().map(|s| s.code()), Some("55P03"), "{err}");
    drop(other);

    // Stop the restarted worker from starting a new pass, then kill this one mid-pass.
    configure(&mut c, &[("workers_enabled", "off")]);
    assert_eq!(runs(&mut c, "forget", "running"), 1, "the pass finished before it could be killed");
    let before_kill = done_users(&mut c);
    assert!(before_kill < USERS as i64, "every user was done before the kill");
    let pid = worker_pid(&mut c).expect("the worker is running");
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    drop(c);

    // The server restarts every process after a crash; the restarted worker marks the run failed.
    let mut c = reconnect_after_crash(DB, pid, Duration::from_secs(120));
    wait_for("the run to be marked failed", Duration::from_secs(90), || runs(&mut c, "forget", "failed") >= 1);
    assert_eq!(runs(&mut c, "forget", "running"), 0);
    let error: Option<String> = c
        .query_one("SELECT error FROM agent_memory.runs WHERE job = 'forget' AND status = 'failed' ORDER BY id DESC LIMIT 1", &[])
        .unwrap()
        .get(0);
    assert!(error.unwrap_or_default().contains("stopped before it finished"));

    // Nothing lost: every row is still there (retired rows are kept), and every retired row
    // was evicted by the pass, with its time.
    let (rows, bad): (i64, i64) = {
        let r = c
            .query_one(
                "SELECT count(*) FILTER (WHERE content LIKE 'memory %'), \
                        count(*) FILTER (WHERE content LIKE 'memory %' AND NOT active AND (retired_reason IS DISTINCT FROM 'evicted' OR retired_at IS NULL)) \
                   FROM agent_memory.memories",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(rows, (USERS * PER_USER) as i64, "rows were lost");
    assert_eq!(bad, 0);

    // No half-done batch: a batch is one user's evictions, so every user the concurrent writers
    // left alone has either all 500 memories active or exactly the capacity.
    let per_user = c
        .query(
            "SELECT user_id, count(*) FILTER (WHERE active) FROM agent_memory.memories \
              WHERE NOT (user_id = ANY ($1)) GROUP BY user_id",
            &[&BUSY_USERS.to_vec()],
        )
        .unwrap();
    let (mut done, mut untouched) = (0, 0);
    for r in &per_user {
        let (user, active): (String, i64) = (r.get(0), r.get(1));
        match active {
            a if a == CAPACITY => done += 1,
            a if a == PER_USER as i64 => untouched += 1,
            a => panic!("user {user} has {a} active memories: a batch was half done"),
        }
    }
    assert!(done >= 10 && untouched >= 1, "done {done}, untouched {untouched}: the kill should land mid-pass");
    println!("killed mid-pass: {done} users done, {untouched} untouched, run marked failed");

    // With the workers on again, the next pass finishes the job.
    configure(&mut c, &[("workers_enabled", "on"), ("batch_pause", "0")]);
    wait_for("a pass to finish the evictions", Duration::from_secs(120), || done_users(&mut c) == USERS as i64);
    reset_settings(&mut c);
}

#[test]
fn sigterm_stops_a_pass_between_batches_and_the_worker_comes_back() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off")]);
    c.batch_execute(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
         SELECT 't-' || (i % 20), 'note ' || i, ARRAY[sin(i), cos(i), 1]::real[]::vector, 't3'
           FROM generate_series(1, 10000) i",
    )
    .unwrap();
    // One user per batch (450 evictions each) and half a second between batches: a pass of ten seconds.
    configure(
        &mut c,
        &[
            ("capacity", "50"),
            ("batch_size", "500"),
            ("batch_pause", "500ms"),
            ("forget_interval", "1s"),
            ("consolidate_interval", "1h"),
            ("workers_enabled", "on"),
        ],
    );
    wait_for("the pass to start", Duration::from_secs(60), || {
        runs(&mut c, "forget", "running") == 1
            && c.query_one("SELECT count(*) FROM agent_memory.memories WHERE NOT active", &[]).unwrap().get::<_, i64>(0) > 0
    });
    let pid = worker_pid(&mut c).expect("the worker is running");
    let t = Instant::now();
    assert!(c.query_one("SELECT pg_terminate_backend($1)", &[&pid]).unwrap().get::<_, bool>(0));
    wait_for("the stopped pass to be recorded", Duration::from_secs(30), || runs(&mut c, "forget", "failed") == 1);
    println!("the worker stopped its pass {:?} after SIGTERM", t.elapsed());
    let error: String = c.query_one("SELECT error FROM agent_memory.runs WHERE job = 'forget' AND status = 'failed'", &[]).unwrap().get(0);
    assert!(error.contains("asked to stop"), "{error}");
    // Whole batches only: every user has all 500 memories active or exactly 50.
    for r in c.query("SELECT user_id, count(*) FILTER (WHERE active) FROM agent_memory.memories GROUP BY user_id", &[]).unwrap() {
        let (user, active): (String, i64) = (r.get(0), r.get(1));
        assert!(active == 500 || active == 50, "user {user} has {active} active memories");
    }
    // The postmaster starts the worker again, and it finishes the job.
    configure(&mut c, &[("batch_pause", "0")]);
    wait_for("the worker to come back", Duration::from_secs(60), || worker_pid(&mut c).is_some_and(|p| p != pid));
    wait_for("the next pass to finish the evictions", Duration::from_secs(60), || {
        c.query_one("SELECT count(*) FROM agent_memory.memories WHERE active", &[]).unwrap().get::<_, i64>(0) == 20 * 50
    });
    reset_settings(&mut c);
}

/// The steps of the worker's forgetting run `id`, its status and its longest batch.
fn forget_run(c: &mut Client, id: i64) -> (serde_json::Value, String, Option<f64>) {
    let r = c.query_one("SELECT steps::text, status, longest_batch_ms FROM agent_memory.runs WHERE id = $1", &[&id]).unwrap();
    (serde_json::from_str(r.get::<_, &str>(0)).unwrap(), r.get(1), r.get(2))
}

/// What `pg_stat_activity` shows of a worker or helper of this database: (backend type, state,
/// query).
type Activity = (String, Option<String>, Option<String>);

fn workers_activity(c: &mut Client) -> Vec<Activity> {
    c.query(
        "SELECT backend_type, state, query FROM pg_stat_activity
          WHERE datname = $1 AND backend_type IN ('agent_memory worker', 'agent_memory helper') ORDER BY backend_type",
        &[&DB],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

/// Whether a helper was among what a pass showed.
fn helper_seen(seen: &[Activity]) -> bool {
    seen.iter().any(|(t, _, _)| t == "agent_memory helper")
}

/// Lets the worker run one forgetting pass, watching what `pg_stat_activity` shows of the worker
/// and its helper, then stops the worker's passes; returns the run's id and what was seen.
fn watched_pass(c: &mut Client) -> (i64, Vec<Activity>) {
    let before: i64 = c.query_one("SELECT coalesce(max(id), 0) FROM agent_memory.runs WHERE job = 'forget'", &[]).unwrap().get(0);
    configure(c, &[("forget_interval", "1s"), ("consolidate_interval", "1h"), ("workers_enabled", "on")]);
    let mut seen: Vec<Activity> = Vec::new();
    let mut run = None;
    wait_for("a forgetting pass to finish", Duration::from_secs(120), || {
        for a in workers_activity(c) {
            if !seen.contains(&a) {
                seen.push(a);
            }
        }
        run = c
            .query_opt(
                "SELECT id FROM agent_memory.runs WHERE job = 'forget' AND by_worker AND id > $1 AND status <> 'running' ORDER BY id LIMIT 1",
                &[&before],
            )
            .unwrap()
            .map(|r| r.get(0));
        run.is_some()
    });
    configure(c, &[("workers_enabled", "off"), ("forget_interval", "1h")]);
    // A pass the worker started before it saw the new settings ends first.
    std::thread::sleep(Duration::from_secs(2));
    wait_for("no pass to run", Duration::from_secs(120), || runs(c, "forget", "running") == 0);
    (run.unwrap(), seen)
}

/// A helper's share of the pass: expired, over-capacity and long-retired memories of `prefix`'s
/// users, and what a dry run counts for each step.
fn helper_data(c: &mut Client, prefix: &str) -> serde_json::Value {
    c.batch_execute(&format!(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
         SELECT '{prefix}' || (i % 30), 'note ' || i, ARRAY[sin(i), cos(i), 1]::real[]::vector, 'h3'
           FROM generate_series(1, 12000) i;
         UPDATE agent_memory.memories SET expires_at = now() - interval '1 hour'
          WHERE user_id LIKE '{prefix}%' AND (id / 30) % 5 = 1;
         UPDATE agent_memory.memories SET active = false, retired_reason = 'evicted', retired_at = now() - interval '40 days'
          WHERE user_id LIKE '{prefix}%' AND (id / 30) % 5 = 2;"
    ))
    .unwrap();
    let mut counts = serde_json::Map::new();
    for r in c.query("SELECT step, rows FROM agent_memory.memory_forget(dry_run => true)", &[]).unwrap() {
        counts.insert(r.get::<_, String>(0), r.get::<_, i64>(1).into());
    }
    serde_json::Value::Object(counts)
}

/// Each of `prefix`'s users after a pass: the capacity's number of live memories, none expired
/// and active, none retired before the regret window.
fn assert_forgotten(c: &mut Client, prefix: &str) {
    let r = c
        .query_one(
            "SELECT count(DISTINCT user_id) FILTER (WHERE active AND archived_at IS NULL),
                    count(*) FILTER (WHERE active AND archived_at IS NULL),
                    count(*) FILTER (WHERE active AND expires_at <= now()),
                    count(*) FILTER (WHERE NOT active AND retired_at < now() - interval '30 days')
               FROM agent_memory.memories WHERE user_id LIKE $1 || '%'",
            &[&prefix],
        )
        .unwrap();
    let (users, live, expired, old): (i64, i64, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3));
    assert_eq!((users, live, expired, old), (30, 30 * 100, 0, 0), "users, live memories, expired and active, retired long ago");
}

#[test]
fn a_helper_expires_and_purges_while_the_worker_evicts() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off"), ("capacity", "100"), ("batch_size", "200"), ("batch_pause", "30ms")]);
    // 30 users × 400 memories: 80 each expired, 80 retired 40 days ago, 240 live for a capacity
    // of 100. Small batches with a pause: a pass of a few seconds.
    let want = helper_data(&mut c, "hp-");
    assert_eq!((want["expire"].as_i64(), want["evict"].as_i64(), want["purge"].as_i64()), (Some(30 * 80), Some(30 * 140), Some(30 * 80)));

    // The helper runs beside the worker; the run does what the dry run counted.
    let (run, seen) = watched_pass(&mut c);
    assert!(helper_seen(&seen), "no helper was seen during the pass");
    let (steps, status, longest) = forget_run(&mut c, run);
    assert_eq!(status, "succeeded", "{steps}");
    for step in ["expire", "evict", "purge"] {
        assert_eq!(steps[step], want[step], "step {step}: the run did {steps}, the dry run counted {want}");
    }
    assert!(longest.is_some_and(|ms| ms > 0.0));
    // The helper's share of the evict step, counted in it.
    let by_helper = steps["evict_by_helper"].as_i64().expect("the helper's part of the evict step");
    assert!((0..=30 * 140).contains(&by_helper), "{steps}");
    assert_forgotten(&mut c, "hp-");

    // With the helper off, the worker runs every step itself, with the same outcome.
    configure(&mut c, &[("forget_helper", "off")]);
    let want = helper_data(&mut c, "hq-");
    let (run, seen) = watched_pass(&mut c);
    assert!(!helper_seen(&seen), "a helper ran although agent_memory.forget_helper is off");
    let (steps, status, _) = forget_run(&mut c, run);
    assert_eq!(status, "succeeded", "{steps}");
    for step in ["expire", "evict", "purge"] {
        assert_eq!(steps[step], want[step], "step {step}: the run did {steps}, the dry run counted {want}");
    }
    assert!(steps.get("evict_by_helper").is_none(), "{steps}");
    assert_forgotten(&mut c, "hq-");
    reset_settings(&mut c);
}

/// One pass over 40 users × 300 live memories for a capacity of 100, nothing expired or to purge
/// (the helper's own steps end at once), each user a batch of its own with a pause between two
/// batches (about two seconds for one process); user ids are `prefix`, two digits and `pad`
/// letters. Checks that the worker and the helper shared the evictions, each user whole, and
/// that what is kept is what one process keeps; returns the helper's part (rows).
fn shared_evictions(c: &mut Client, prefix: &str, pad: usize) -> i64 {
    configure(c, &[("workers_enabled", "off"), ("capacity", "100"), ("batch_size", "200"), ("batch_pause", "50ms")]);
    c.batch_execute(&format!(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance)
         SELECT '{prefix}' || lpad((i % 40)::text, 2, '0') || repeat('x', {pad}), 'note ' || i,
                ARRAY[sin(i), cos(i), 1]::real[]::vector, 'h3', (i % 7) / 7.0
           FROM generate_series(1, 12000) i"
    ))
    .unwrap();
    let want: i64 = c.query_one("SELECT rows FROM agent_memory.memory_forget(dry_run => true) WHERE step = 'evict'", &[]).unwrap().get(0);
    assert_eq!(want, 40 * 200);
    // The memories each user keeps: the capacity's best by retention score, as one process
    // would keep them.
    let keep: Vec<(String, i64)> = c
        .query(
            "SELECT user_id, id FROM (SELECT user_id, id, row_number() OVER (PARTITION BY user_id
                      ORDER BY agent_memory.memory_retention_score(importance, last_hit_at, hit_count) DESC, id DESC) AS n
                      FROM agent_memory.memories WHERE user_id LIKE $1 || '%') r
              WHERE n <= 100 ORDER BY 1, 2",
            &[&prefix],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();

    let (run, seen) = watched_pass(c);
    assert!(helper_seen(&seen), "no helper was seen during the pass");
    let (steps, status, _) = forget_run(c, run);
    assert_eq!(status, "succeeded", "{steps}");
    assert_eq!(steps["evict"].as_i64(), Some(want), "{steps}");
    // Both evicted: the worker from the front of the list, the helper from its end.
    let by_helper = steps["evict_by_helper"].as_i64().unwrap();
    assert!(by_helper > 0 && by_helper < want, "the helper evicted {by_helper} of {want}: {steps}");
    assert_eq!(by_helper % 200, 0, "the helper takes whole users: {steps}");
    // What stays is what one process keeps: no user was ranked twice or skipped.
    let kept: Vec<(String, i64)> = c
        .query("SELECT user_id, id FROM agent_memory.memories WHERE user_id LIKE $1 || '%' AND active ORDER BY 1, 2", &[&prefix])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(kept.len(), 40 * 100);
    assert!(kept == keep, "the memories kept differ from the capacity's best by retention score");
    // Each batch retires one user, at its transaction's time: in user order, the worker's users
    // retire one after another from the first, the helper's from the last, so the times rise up
    // to the last user of the worker and fall after it.
    let times: Vec<f64> = c
        .query(
            "SELECT extract(epoch FROM max(retired_at))::float8 FROM agent_memory.memories
              WHERE user_id LIKE $1 || '%' AND NOT active GROUP BY user_id ORDER BY user_id",
            &[&prefix],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let helpers = (by_helper / 200) as usize;
    let (worker_part, helper_part) = times.split_at(40 - helpers);
    assert!(worker_part.windows(2).all(|w| w[0] < w[1]), "the worker's users in list order: {times:?}");
    assert!(helper_part.windows(2).all(|w| w[0] > w[1]), "the helper's users from the list's end: {times:?}");
    by_helper
}

#[test]
fn the_helper_evicts_from_the_end_of_the_list_once_its_steps_are_done() {
    let mut c = worker_db();
    shared_evictions(&mut c, "he-", 0);
    reset_settings(&mut c);
}

#[test]
fn a_list_longer_than_the_shared_memory_is_shared_by_its_tail() {
    let mut c = worker_db();
    // Ids of 2,005 bytes: the shared slot (32 kB) holds the last 16 of the 40 users, and the
    // helper takes users from those only.
    let by_helper = shared_evictions(&mut c, "hf-", 2000);
    assert!(by_helper <= 16 * 200, "the helper evicted {by_helper} rows, more than the 16 users it holds");
    reset_settings(&mut c);
}

/// How many row updates of the memories table `pg_stat_user_tables` has counted (a counter
/// autovacuum never resets, unlike its count of dead rows).
fn rows_updated(c: &mut Client) -> i64 {
    c.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
    c.query_one("SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'agent_memory.memories'::regclass", &[]).unwrap().get(0)
}

#[test]
fn what_a_pass_changes_is_counted_while_the_worker_lives_on() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off"), ("forget_helper", "off"), ("capacity", "100"), ("batch_size", "200")]);
    wait_for("the worker to connect", Duration::from_secs(60), || worker_pid(&mut c).is_some());
    let pid = worker_pid(&mut c).unwrap();
    c.batch_execute(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
         SELECT 'st-' || (i % 10), 'note ' || i, ARRAY[sin(i), cos(i), 1]::real[]::vector, 'h3'
           FROM generate_series(1, 3000) i",
    )
    .unwrap();
    // This session's own counts reach the view within a second or so of going idle.
    std::thread::sleep(Duration::from_secs(2));
    let updated = rows_updated(&mut c);

    // The worker evicts 10 × 200 memories (each an UPDATE, leaving a dead row version).
    let (run, _) = watched_pass(&mut c);
    let (steps, status, _) = forget_run(&mut c, run);
    assert_eq!(status, "succeeded", "{steps}");
    let evicted = steps["evict"].as_i64().unwrap();
    assert!(evicted >= 10 * 200, "{steps}");

    // The statistics views, and autovacuum, which reads the same counters, see them without the
    // worker having to exit.
    wait_for("the pass's updates in pg_stat_user_tables", Duration::from_secs(20), || rows_updated(&mut c) >= updated + evicted);
    assert_eq!(worker_pid(&mut c), Some(pid), "the worker restarted: its exit, not the worker, counted the rows");
    reset_settings(&mut c);
}

#[test]
fn pg_stat_activity_shows_what_the_worker_and_its_helper_run() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off"), ("capacity", "100"), ("batch_size", "200"), ("batch_pause", "30ms")]);
    wait_for("the worker to connect", Duration::from_secs(60), || worker_pid(&mut c).is_some());
    let worker_idle =
        |c: &mut Client| workers_activity(c).iter().any(|(t, s, _)| t == "agent_memory worker" && s.as_deref() == Some("idle"));
    // Between passes: idle.
    wait_for("the worker to be idle", Duration::from_secs(30), || worker_idle(&mut c));
    helper_data(&mut c, "sa-");
    let (_, seen) = watched_pass(&mut c);
    let active = |(t, s, _): &Activity, backend: &str| t == backend && s.as_deref() == Some("active");
    assert!(
        seen.iter().any(|a| active(a, "agent_memory worker") && a.2.as_deref() == Some("agent_memory: forgetting pass")),
        "the worker never showed as active with its pass: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|a| active(a, "agent_memory helper")
                && a.2.as_deref().is_some_and(|q| q.starts_with("agent_memory: helper of forgetting run"))),
        "the helper never showed as active with its pass: {seen:?}"
    );
    // Once the pass is over, the worker shows as idle again.
    wait_for("the worker to be idle after its pass", Duration::from_secs(30), || worker_idle(&mut c));
    reset_settings(&mut c);
}

#[test]
fn the_pack_pass_sweeps_packs_whose_user_has_none() {
    let mut c = worker_db();
    let mut rng = Rng(77);
    for user in ["sweep-gone", "sweep-kept"] {
        for i in 0..200 {
            c.execute(
                "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ($1, $2, $3, 'sweep8')",
                &[&user, &format!("note {i}"), &Vector::from(rng.vector(8))],
            )
            .unwrap();
        }
        c.query_one("SELECT agent_memory.memory_pack($1)", &[&user]).unwrap();
    }
    // What an erasure that raced a rebuild left before 0.6.0: packs whose user has no
    // memory_pack_users row and no memory.
    c.batch_execute(
        "DELETE FROM agent_memory.memory_pack_users WHERE user_id = 'sweep-gone';
         SET session_replication_role = replica; -- the delete triggers would mark every row stale
         DELETE FROM agent_memory.memories WHERE user_id = 'sweep-gone';
         RESET session_replication_role;
         INSERT INTO agent_memory.memory_pack_stale VALUES ('sweep-gone', 'sweep8', 1);",
    )
    .unwrap();
    let left = |c: &mut Client, user: &str| -> i64 {
        c.query_one(
            "SELECT (SELECT count(*) FROM agent_memory.memory_packs WHERE user_id = $1) \
                  + (SELECT count(*) FROM agent_memory.memory_pack_stale WHERE user_id = $1)",
            &[&user],
        )
        .unwrap()
        .get(0)
    };
    assert!(left(&mut c, "sweep-gone") > 1);
    let kept = left(&mut c, "sweep-kept");
    configure(&mut c, &[("pack_interval", "1")]);
    wait_for("the pack pass to sweep the orphaned packs", Duration::from_secs(30), || left(&mut c, "sweep-gone") == 0);
    reset_settings(&mut c);
    assert_eq!(left(&mut c, "sweep-kept"), kept, "the packs of a user with memories stay");
}

#[test]
fn a_crashed_backend_restarts_the_server_with_its_worker() {
    let mut c = worker_db();
    let before = {
        wait_for("the worker", Duration::from_secs(30), || worker_pid(&mut c).is_some());
        worker_pid(&mut c).unwrap()
    };
    let mut victim = connect(DB);
    let pid: i32 = victim.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let status = std::process::Command::new("kill").args(["-SEGV", &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill -SEGV {pid}");
    drop(victim);
    drop(c);
    let mut c = reconnect_after_crash(DB, pid, Duration::from_secs(60));
    wait_for("the worker after the restart", Duration::from_secs(60), || worker_pid(&mut c).is_some_and(|p| p != before));
    // The restarted server works: a write and a recall of the library preloaded before the crash.
    let q = Vector::from(vec![0.1f32; 8]);
    c.query(
        "SELECT * FROM agent_memory.memory_reconcile('crash-user', NULL, NULL, NULL, 'after the crash', $1::vector, model => 'crash8')",
        &[&q],
    )
    .unwrap();
    let n = c.query("SELECT id FROM agent_memory.memory_recall('crash-user', $1::vector, 5, model => 'crash8')", &[&q]).unwrap().len();
    assert_eq!(n, 1);
}

/// Memories of the embedding test, and how many of them still wait for their embedding.
fn waiting(c: &mut Client) -> (i64, i64) {
    let r = c
        .query_one("SELECT count(*), count(*) FILTER (WHERE emb IS NULL) FROM agent_memory.memories WHERE user_id LIKE 'async-%'", &[])
        .unwrap();
    (r.get(0), r.get(1))
}

#[test]
fn the_worker_embeds_memories_written_without_one_in_batches_through_a_crash() {
    const ROWS: i64 = 240;
    let mut c = worker_db();
    // No pass runs while the rows are written and looked at.
    configure(&mut c, &[("workers_enabled", "off"), ("embed_interval", "100ms"), ("embed_batch_size", "8")]);
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'async-%'").unwrap();
    let mut w = connect(DB);
    w.batch_execute("SET agent_memory.embed_async = on").unwrap();
    w.batch_execute(&format!(
        "INSERT INTO agent_memory.memories (user_id, content) \
         SELECT 'async-' || (g % 6), 'Note ' || g || ': ' || (ARRAY['paddles a kayak at dawn', 'keeps bees behind the shed', \
                'tunes an old violin', 'brews oolong tea', 'collects tram tickets'])[1 + g % 5] \
           FROM generate_series(1, {}) g",
        ROWS - 20
    ))
    .unwrap();
    let mut copy = w.copy_in("COPY agent_memory.memories (user_id, content) FROM STDIN").unwrap();
    use std::io::Write;
    for i in 0..10 {
        writeln!(copy, "async-copy\tCopied note {i} about a lighthouse keeper").unwrap();
    }
    copy.finish().unwrap();
    for i in 0..10 {
        w.query(
            "SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2)",
            &[&"async-reconcile", &format!("Reconciled note {i}: practises calligraphy")],
        )
        .unwrap();
    }
    assert_eq!(waiting(&mut c), (ROWS, ROWS), "every row is stored at once, without its embedding");
    // Each store of an embedding is logged in its own transaction: what a crash undoes leaves no
    // line, so the log is the history that survived.
    c.batch_execute(
        "DROP TABLE IF EXISTS public.embedded_log;
         CREATE TABLE public.embedded_log (id bigint NOT NULL);
         CREATE OR REPLACE FUNCTION public.log_embedding() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
         BEGIN INSERT INTO public.embedded_log VALUES (NEW.id); RETURN NEW; END $$;
         CREATE TRIGGER zz_log_embedding AFTER UPDATE ON agent_memory.memories FOR EACH ROW
             WHEN (OLD.emb IS NULL AND NEW.emb IS NOT NULL AND NEW.user_id LIKE 'async-%')
             EXECUTE FUNCTION public.log_embedding();",
    )
    .unwrap();
    let by_words =
        c.query("SELECT id FROM agent_memory.memory_recall('async-copy', NULL, 3, query_text => 'lighthouse keeper')", &[]).unwrap().len();
    assert_eq!(by_words, 3, "keyword recall finds the rows before they are embedded");

    // The worker embeds them in batches; it is killed in the middle of the work.
    configure(&mut c, &[("workers_enabled", "on")]);
    wait_for("the worker", Duration::from_secs(60), || worker_pid(&mut c).is_some());
    wait_for("a first batch", Duration::from_secs(60), || waiting(&mut c).1 < ROWS);
    let (_, left) = waiting(&mut c);
    assert!(left > 0, "the kill is meant for the middle of the work; all {ROWS} were embedded first");
    let pid = worker_pid(&mut c).expect("the worker");
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill -9 {pid}");
    drop(w);
    drop(c);
    let mut c = reconnect_after_crash(DB, pid, Duration::from_secs(60));
    wait_for("every memory to be embedded", Duration::from_secs(240), || waiting(&mut c).1 == 0);

    // Nothing lost, each embedding stored once, each the model's embedding of its own content, and
    // the memory's version as it was written (the embedding is no change of the memory).
    let r = c
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE version = 1), \
                    min(1 - (emb <=> agent_memory.memory_embed(content))) \
               FROM agent_memory.memories WHERE user_id LIKE 'async-%'",
            &[],
        )
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), ROWS, "no row lost");
    assert_eq!(r.get::<_, i64>(1), ROWS, "the embedding changed a memory's version");
    assert!(r.get::<_, f64>(2) > 0.9999, "an embedding is not its content's: {}", r.get::<_, f64>(2));
    let log = c.query_one("SELECT count(*), count(DISTINCT id) FROM public.embedded_log", &[]).unwrap();
    assert_eq!((log.get::<_, i64>(0), log.get::<_, i64>(1)), (ROWS, ROWS), "every row's embedding is stored exactly once");
    c.batch_execute(
        "DROP TRIGGER zz_log_embedding ON agent_memory.memories; DROP TABLE public.embedded_log; DROP FUNCTION public.log_embedding()",
    )
    .unwrap();
    // Vector recall finds them now.
    let q: Vector = c.query_one("SELECT agent_memory.memory_embed('a lighthouse keeper')", &[]).unwrap().get(0);
    let found = c
        .query("SELECT id FROM agent_memory.memory_recall('async-copy', $1::vector, 3, model => 'all-MiniLM-L6-v2')", &[&q])
        .unwrap()
        .len();
    assert_eq!(found, 3);
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'async-%'").unwrap();
    reset_settings(&mut c);
}

#[test]
fn an_erasure_during_the_embedding_pass_leaves_none_of_the_users_embeddings_behind() {
    const ROWS: i64 = 160;
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off"), ("embed_interval", "100ms"), ("embed_batch_size", "8")]);
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'erase-async-%'").unwrap();
    c.batch_execute(&format!(
        "SET agent_memory.embed_async = on;
         INSERT INTO agent_memory.memories (user_id, content)
         SELECT 'erase-async-' || (g % 2), 'Erasable note ' || g || ' on a quince orchard and its ' || g * 7 || ' trees'
           FROM generate_series(1, {ROWS}) g;
         RESET agent_memory.embed_async;"
    ))
    .unwrap();
    // The entries of the shared cache of the user's texts (its scope: sql/schema.sql, uncache_user).
    let cached = |c: &mut Client, user: &str| -> i64 {
        c.query_one(
            "SELECT count(*) FROM agent_memory.embedding_cache e, agent_memory.lock_salt s
              WHERE e.scope_hash = sha256(s.receipt_key || convert_to('user:' || $1, 'UTF8'))",
            &[&user],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(cached(&mut c, "erase-async-0"), 0);
    configure(&mut c, &[("workers_enabled", "on")]);
    wait_for("the worker", Duration::from_secs(60), || worker_pid(&mut c).is_some());
    wait_for("a first batch", Duration::from_secs(60), || waiting_of(&mut c, "erase-async-%") < ROWS);
    // The erasure lands while the worker embeds the two users' rows, batch after batch.
    let erased: i64 = c.query_one("SELECT memories FROM agent_memory.memory_erase('erase-async-0')", &[]).unwrap().get(0);
    assert!(erased > 0);
    wait_for("the other user's rows to be embedded", Duration::from_secs(120), || waiting_of(&mut c, "erase-async-%") == 0);
    let left: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'erase-async-0'", &[]).unwrap().get(0);
    assert_eq!(left, 0, "rows of the erased user came back");
    assert_eq!(cached(&mut c, "erase-async-0"), 0, "embeddings of the erased user's texts outlived the erasure in the cache");
    assert!(cached(&mut c, "erase-async-1") > 0, "the other user's texts are cached as usual");
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'erase-async-%'").unwrap();
    reset_settings(&mut c);
}

#[test]
fn the_worker_makes_a_long_memorys_windows_when_it_embeds_it() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off"), ("embed_interval", "100ms"), ("embed_windows", "3")]);
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'async-win-%'").unwrap();
    // A long memory (about 400 word pieces) and a short one, written for the worker; the same long
    // content written at once, with the same setting, by the session.
    let long = "The harbour ferry leaves at seven and the crossing takes forty minutes in calm weather. ".repeat(15)
        + &"The lighthouse keeper repaints the lamp room every spring with white enamel. ".repeat(10);
    c.batch_execute("SET agent_memory.embed_async = on; SET agent_memory.embed_windows = 0").unwrap();
    c.execute(
        "INSERT INTO agent_memory.memories (user_id, content) VALUES ('async-win-1', $1), ('async-win-1', 'A short note on kites')",
        &[&long],
    )
    .unwrap();
    c.batch_execute("RESET agent_memory.embed_async; SET agent_memory.embed_windows = 3").unwrap();
    c.execute("INSERT INTO agent_memory.memories (user_id, content) VALUES ('async-win-2', $1)", &[&long]).unwrap();
    c.batch_execute("RESET agent_memory.embed_windows").unwrap();
    let pending: i64 = c
        .query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'async-win-1' AND emb IS NULL AND emb_windows IS NULL", &[])
        .unwrap()
        .get(0);
    assert_eq!(pending, 2, "written without an embedding, and so without windows");
    configure(&mut c, &[("workers_enabled", "on")]);
    wait_for("the worker to embed them", Duration::from_secs(120), || waiting_of(&mut c, "async-win-%") == 0);
    // The worker's write of the embedding made the windows (the worker's own setting: 3), as the
    // session's write did; the short memory has none.
    let r = c
        .query_one(
            "SELECT cardinality(w.emb_windows), cardinality(s.emb_windows),
                    (SELECT min(1 - (a <=> b)) FROM unnest(w.emb_windows, s.emb_windows) AS x(a, b)),
                    (SELECT emb_windows IS NULL FROM agent_memory.memories WHERE user_id = 'async-win-1' AND content LIKE 'A short%')
               FROM agent_memory.memories w, agent_memory.memories s
              WHERE w.user_id = 'async-win-1' AND w.content = $1 AND s.user_id = 'async-win-2'",
            &[&long],
        )
        .unwrap();
    let (by_worker, by_session) = (r.get::<_, Option<i32>>(0), r.get::<_, Option<i32>>(1));
    assert!(by_worker.is_some_and(|n| n >= 1), "the worker made the long memory's windows: {by_worker:?}");
    assert_eq!(by_worker, by_session, "as many as the session's write made");
    assert!(r.get::<_, f64>(2) > 0.9999, "the worker's windows are the session's: {}", r.get::<_, f64>(2));
    assert!(r.get::<_, bool>(3), "a short memory has no windows");
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'async-win-%'").unwrap();
    reset_settings(&mut c);
}

/// Thirty rows of about 0.75 MB each, written under embed_async: the worker reads and embeds
/// only the start of each (what the model reads), in batches under agent_memory.embed_max_bytes,
/// and neither it nor the server restarts.
#[test]
fn large_rows_written_for_the_worker_are_embedded_without_a_restart() {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "off"), ("embed_interval", "100ms"), ("embed_batch_size", "64")]);
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'big-async-%'").unwrap();
    c.batch_execute(
        "SET agent_memory.embed_async = on;
         INSERT INTO agent_memory.memories (user_id, content)
         SELECT 'big-async-' || (g % 3), g || ' ' || repeat('the keeper of the lighthouse wrote a long letter every winter ', 12000)
           FROM generate_series(1, 30) g;
         RESET agent_memory.embed_async;",
    )
    .unwrap();
    assert_eq!(waiting_of(&mut c, "big-async-%"), 30);
    let started: std::time::SystemTime = c.query_one("SELECT pg_postmaster_start_time()", &[]).unwrap().get(0);
    configure(&mut c, &[("workers_enabled", "on")]);
    wait_for("the worker", Duration::from_secs(60), || worker_pid(&mut c).is_some());
    let pid = worker_pid(&mut c);
    wait_for("the large rows to be embedded", Duration::from_secs(180), || waiting_of(&mut c, "big-async-%") == 0);
    assert_eq!(worker_pid(&mut c), pid, "the same worker embedded them all");
    let now: std::time::SystemTime = c.query_one("SELECT pg_postmaster_start_time()", &[]).unwrap().get(0);
    assert_eq!(now, started, "the server did not restart");
    c.batch_execute("DELETE FROM agent_memory.memories WHERE user_id LIKE 'big-async-%'").unwrap();
    reset_settings(&mut c);
}

/// An idle worker, looking for memories to embed ten times a second, takes no transaction id
/// (and so writes no commit record).
#[test]
fn an_idle_worker_takes_no_transaction_id() {
    let mut c = worker_db();
    configure(
        &mut c,
        &[
            ("workers_enabled", "on"),
            ("embed_interval", "100ms"),
            ("forget_interval", "1h"),
            ("consolidate_interval", "1h"),
            ("pack_interval", "1h"),
        ],
    );
    wait_for("the worker", Duration::from_secs(60), || worker_pid(&mut c).is_some());
    // Its first passes (each records its run) are done by then.
    std::thread::sleep(Duration::from_secs(3));
    let xid = |c: &mut Client| -> i64 { c.query_one("SELECT pg_current_xact_id()::text::bigint", &[]).unwrap().get(0) };
    let before = xid(&mut c);
    std::thread::sleep(Duration::from_secs(3));
    let taken = xid(&mut c) - before - 1;
    // About 30 passes ran; a few ids may go to autovacuum or another test's leftovers.
    assert!(taken < 5, "{taken} transaction ids were taken in 3 s by an idle server");
    reset_settings(&mut c);
}

fn waiting_of(c: &mut Client, pattern: &str) -> i64 {
    c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id LIKE $1 AND emb IS NULL", &[&pattern]).unwrap().get(0)
}

// --- Recall's hits, folded by the worker (src/api/hits.rs) ---------------------------------------

const HIT_DIMS: usize = 8;

fn deferred(c: &mut Client) -> bool {
    c.query_one("SELECT deferred FROM agent_memory.memory_hit_stats()", &[]).unwrap().get(0)
}

fn pending_hits(c: &mut Client) -> i64 {
    c.query_one("SELECT pending FROM agent_memory.memory_hit_stats()", &[]).unwrap().get(0)
}

/// `n` memories of `user` with random embeddings of model `hit8`; returns their ids.
fn hit_user(c: &mut Client, user: &str, n: usize, rng: &mut Rng) -> Vec<i64> {
    (0..n)
        .map(|i| {
            let v = Vector::from(rng.vector(HIT_DIMS));
            c.query_one(
                "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ($1, $2, $3, 'hit8') RETURNING id",
                &[&user, &format!("{user} memory {i}"), &v],
            )
            .unwrap()
            .get(0)
        })
        .collect()
}

fn hit_counts(c: &mut Client, user: &str) -> std::collections::BTreeMap<i64, i32> {
    c.query("SELECT id, hit_count FROM agent_memory.memories WHERE user_id = $1", &[&user])
        .unwrap()
        .into_iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// The ids one recall of `user` returns, with its touch.
fn recall_ids(c: &mut Client, user: &str, q: &Vector) -> Vec<i64> {
    c.query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 5, model => 'hit8')", &[&user, q])
        .unwrap()
        .into_iter()
        .map(|r| r.get(0))
        .collect()
}

/// The WAL records a statement generated in this backend (EXPLAIN's own count: nothing else
/// on the server adds to it).
fn wal_records(c: &mut Client, sql: &str, q: &Vector) -> i64 {
    let literal = format!("'[{}]'", q.as_slice().iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","));
    explain_analyze_wal(c, &sql.replace("$1", &literal))["WAL Records"].as_i64().expect("EXPLAIN shows the WAL records")
}

/// The workers' database with its worker folding hits, and nothing else of the worker's due for
/// an hour (its folds included, until a test shortens the interval).
fn folding_worker() -> Client {
    let mut c = worker_db();
    configure(&mut c, &[("workers_enabled", "on"), ("forget_interval", "1h"), ("consolidate_interval", "1h"), ("hit_fold_interval", "1h")]);
    wait_for("the worker to fold this database's hits", Duration::from_secs(60), || deferred(&mut c));
    c
}

#[test]
fn a_recall_writes_nothing_and_the_worker_folds_its_hits_within_its_interval() {
    let mut c = folding_worker();
    let mut rng = Rng(0x5eed_0f17);
    let ids = hit_user(&mut c, "hits-a", 40, &mut rng);
    hit_user(&mut c, "hits-b", 10, &mut rng);
    let queries: Vec<Vector> = (0..100).map(|_| Vector::from(rng.vector(HIT_DIMS))).collect();
    let before = hit_counts(&mut c, "hits-a");
    assert!(before.values().all(|n| *n == 0));

    // Each kind of recall, and memory_context, generates no WAL in its backend and takes no
    // transaction id. (Each runs once first: a first read may prune a page of the catalog that
    // the extension's creation left dead rows in, or set hint bits that a server with data
    // checksums logs, whatever reads them.)
    for sql in [
        "SELECT * FROM agent_memory.memory_recall('hits-a', $1::vector, 5, model => 'hit8')",
        "SELECT * FROM agent_memory.memory_recall('hits-a', $1::vector, 5, model => 'hit8', query_text => 'memory 3')",
        "SELECT * FROM agent_memory.memory_context('hits-a', 'session-1', $1::vector, model => 'hit8', query_text => 'memory')",
    ] {
        c.query(sql, &[&queries[0]]).unwrap();
        assert_eq!(wal_records(&mut c, sql, &queries[0]), 0, "{sql}");
        let mut t = c.transaction().unwrap();
        t.query(sql, &[&queries[0]]).unwrap();
        let xid: Option<String> = t.query_one("SELECT pg_current_xact_id_if_assigned()::text", &[]).unwrap().get(0);
        assert_eq!(xid, None, "{sql} took a transaction id");
        t.rollback().unwrap();
    }
    c.batch_execute("SELECT agent_memory.memory_fold_hits()").unwrap();
    let start = hit_counts(&mut c, "hits-a");

    // 100 recalls on an idle server leave the WAL where it was (tried up to three times, in
    // case autovacuum or a checkpoint writes meanwhile; a recall that wrote would fail each).
    let mut expected = start.clone();
    let mut unchanged = false;
    for _ in 0..3 {
        let lsn: String = c.query_one("SELECT pg_current_wal_lsn()::text", &[]).unwrap().get(0);
        for q in &queries {
            for id in recall_ids(&mut c, "hits-a", q) {
                *expected.get_mut(&id).unwrap() += 1;
            }
        }
        let after: String = c.query_one("SELECT pg_current_wal_lsn()::text", &[]).unwrap().get(0);
        if lsn == after {
            unchanged = true;
            break;
        }
    }
    assert!(unchanged, "100 recalls moved the WAL on each of three tries");
    assert_eq!(hit_counts(&mut c, "hits-a"), start, "the rows are not touched before the fold");
    assert!(pending_hits(&mut c) > 0);

    // touch => false records nothing.
    let waiting = pending_hits(&mut c);
    let recorded: i64 = c.query_one("SELECT recorded FROM agent_memory.memory_hit_stats()", &[]).unwrap().get(0);
    c.query("SELECT * FROM agent_memory.memory_recall('hits-b', $1::vector, 5, model => 'hit8', touch => false)", &[&queries[1]]).unwrap();
    let r = c.query_one("SELECT pending, recorded FROM agent_memory.memory_hit_stats()", &[]).unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (waiting, recorded));

    // A short interval, after a reload: the worker folds every hit, each memory counted as
    // often as recall returned it, and last_hit_at is the time of the latest of those recalls.
    let recalled_at: String = c.query_one("SELECT clock_timestamp()::text", &[]).unwrap().get(0);
    configure(&mut c, &[("hit_fold_interval", "200ms")]);
    wait_for("the worker to fold the hits", Duration::from_secs(20), || hit_counts(&mut c, "hits-a") == expected);
    assert_eq!(pending_hits(&mut c), 0);
    let stale: i64 = c
        .query_one(
            "SELECT count(*) FROM agent_memory.memories WHERE user_id = 'hits-a' AND hit_count > 0 AND last_hit_at > $1::text::timestamptz",
            &[&recalled_at],
        )
        .unwrap()
        .get(0);
    assert_eq!(stale, 0, "last_hit_at is the recall's time, not the fold's");
    let hit: i64 = c
        .query_one(
            "SELECT count(*) FROM agent_memory.memories WHERE user_id = 'hits-a' AND hit_count > 0 AND last_hit_at > created_at",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(hit as usize, expected.values().filter(|n| **n > 0).count());
    assert!(ids.iter().all(|id| expected.contains_key(id)));
    let untouched = hit_counts(&mut c, "hits-b");
    assert!(untouched.values().all(|n| *n == 0), "touch => false counted: {untouched:?}");
    reset_settings(&mut c);
}

/// A tenant holding a lock on its own recalled memory stalls no fold: the fold passes that
/// memory over (its hits wait in shared memory for the next fold) and folds every other.
#[test]
fn a_fold_waits_on_no_tenants_lock() {
    let mut c = folding_worker();
    let mut rng = Rng(0x10c4);
    let held = hit_user(&mut c, "hits-holder", 3, &mut rng);
    hit_user(&mut c, "hits-other", 3, &mut rng);
    for user in ["hits-holder", "hits-other"] {
        for _ in 0..4 {
            recall_ids(&mut c, user, &Vector::from(rng.vector(HIT_DIMS)));
        }
    }
    let mut tenant = connect(DB);
    let mut t = tenant.transaction().unwrap();
    t.query("SELECT id FROM agent_memory.memories WHERE id = ANY ($1) FOR UPDATE", &[&held]).unwrap();
    // Bounded: a fold that waited would fail here instead of hanging.
    c.batch_execute("SET statement_timeout = '10s'").unwrap();
    c.batch_execute("SELECT agent_memory.memory_fold_hits()").unwrap();
    c.batch_execute("RESET statement_timeout").unwrap();
    let other: i32 = hit_counts(&mut c, "hits-other").values().sum();
    assert_eq!(other, 12, "the other tenant's hits are folded");
    assert!(hit_counts(&mut c, "hits-holder").values().all(|n| *n == 0), "the held rows are passed over");
    assert!(pending_hits(&mut c) >= 1, "the held rows' hits wait");
    t.rollback().unwrap();
    c.batch_execute("SELECT agent_memory.memory_fold_hits()").unwrap();
    let holder: i32 = hit_counts(&mut c, "hits-holder").values().sum();
    assert_eq!(holder, 12, "the next fold folds them");
    assert_eq!(pending_hits(&mut c), 0);
    reset_settings(&mut c);
}

#[test]
fn folded_hits_decide_what_forgetting_keeps_and_a_crash_loses_only_unfolded_hits() {
    let mut c = folding_worker();
    let mut rng = Rng(0xf01d);
    let ids = hit_user(&mut c, "hits-keep", 20, &mut rng);
    // Five memories are recalled often; their hits are still in shared memory when forgetting
    // runs by hand, which folds them first and so keeps the five.
    let wanted: Vec<i64> = ids[..5].to_vec();
    for _ in 0..10 {
        let q: Vec<Vector> = c
            .query("SELECT emb FROM agent_memory.memories WHERE id = ANY ($1) ORDER BY id", &[&wanted])
            .unwrap()
            .into_iter()
            .map(|r| r.get(0))
            .collect();
        for v in &q {
            let got: Vec<i64> = c
                .query("SELECT id FROM agent_memory.memory_recall('hits-keep', $1::vector, 1, model => 'hit8')", &[v])
                .unwrap()
                .into_iter()
                .map(|r| r.get(0))
                .collect();
            assert_eq!(got.len(), 1);
            assert!(wanted.contains(&got[0]));
        }
    }
    assert!(hit_counts(&mut c, "hits-keep").values().all(|n| *n == 0), "not folded yet");
    c.batch_execute("SET agent_memory.capacity = 10; SELECT * FROM agent_memory.memory_forget(); RESET agent_memory.capacity").unwrap();
    let kept: Vec<i64> = c
        .query(
            "SELECT id FROM agent_memory.memories WHERE user_id = 'hits-keep' AND active AND archived_at IS NULL AND id = ANY ($1)",
            &[&wanted],
        )
        .unwrap()
        .into_iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(kept.len(), 5, "forgetting evicted recalled memories: kept {kept:?} of {wanted:?}");
    let counts = hit_counts(&mut c, "hits-keep");
    assert!(wanted.iter().all(|id| counts[id] == 10), "{counts:?}");

    // A crash: the hits not folded yet are lost, never a memory or a folded hit.
    let rows_before: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'hits-keep'", &[]).unwrap().get(0);
    let q: Vector = c.query_one("SELECT emb FROM agent_memory.memories WHERE id = $1", &[&wanted[0]]).unwrap().get(0);
    for _ in 0..7 {
        c.query("SELECT id FROM agent_memory.memory_recall('hits-keep', $1::vector, 1, model => 'hit8')", &[&q]).unwrap();
    }
    assert!(pending_hits(&mut c) > 0);
    let mut victim = connect(DB);
    let pid: i32 = victim.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    assert!(std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    drop(victim);
    drop(c);
    let mut c = reconnect_after_crash(DB, pid, Duration::from_secs(60));
    let rows_after: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'hits-keep'", &[]).unwrap().get(0);
    assert_eq!(rows_after, rows_before, "a crash lost a memory");
    assert_eq!(hit_counts(&mut c, "hits-keep")[&wanted[0]], 10, "the folded hits stay, the unfolded 7 are gone");
    wait_for("the worker to fold hits again after the restart", Duration::from_secs(60), || deferred(&mut c));
    for _ in 0..3 {
        c.query("SELECT id FROM agent_memory.memory_recall('hits-keep', $1::vector, 1, model => 'hit8')", &[&q]).unwrap();
    }
    // A worker asked to stop folds what is waiting on its way out.
    let worker = worker_pid(&mut c).unwrap();
    c.batch_execute(&format!("SELECT pg_terminate_backend({worker})")).unwrap();
    wait_for("the stopping worker to fold the hits", Duration::from_secs(30), || hit_counts(&mut c, "hits-keep")[&wanted[0]] == 13);
    wait_for("the worker to come back", Duration::from_secs(60), || worker_pid(&mut c).is_some_and(|p| p != worker));
    reset_settings(&mut c);
}
