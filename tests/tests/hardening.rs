//! The extension as an operator and an attacker meet it, against the real test server:
//! a `pg_dump` / `pg_restore` round trip keeps every memory; a long batch stops at a statement
//! timeout; and a database owner who is no superuser cannot make the background worker run their
//! code or take their settings (a search path, a capacity of 1, a regret window of 0).

use std::process::Command;
use std::time::{Duration, Instant};

use agent_memory_tests::{alter_system, connect, fresh_db, reset_system, worker_database, Rng};
use pgvector::Vector;
use postgres::Client;

fn bindir() -> String {
    let out = Command::new("pg_config").arg("--bindir").output().expect("pg_config");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn server_args() -> Vec<String> {
    let (host, port) = agent_memory_tests::host_port();
    vec!["-h".into(), host, "-p".into(), port, "-U".into(), "postgres".into()]
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

/// Rows per table, in a fixed order.
fn counts(c: &mut Client) -> Vec<(String, i64)> {
    ["memories", "turns", "embedding_models", "runs", "maintenance_state"]
        .iter()
        .map(|t| (t.to_string(), c.query_one(&format!("SELECT count(*) FROM agent_memory.{t}"), &[]).unwrap().get(0)))
        .collect()
}

fn recall_ids(c: &mut Client, user: &str, q: &[f32]) -> Vec<(i64, String)> {
    c.query(
        "SELECT id, content FROM agent_memory.memory_recall($1, $2::vector, 5, model => 'dump8', touch => false)",
        &[&user, &Vector::from(q.to_vec())],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

#[test]
fn dump_and_restore_keep_every_memory_and_the_rules() {
    let mut c = fresh_db("agent_memory_dump_src");
    let mut rng = Rng(11);
    // Facts with a supersession chain, free text, turns that facts point to, a run and the
    // halving clock.
    for user in ["dump-a", "dump-b", "dump-c"] {
        let turn: i64 =
            c.query_one("SELECT agent_memory.memory_record_turn($1, 's1', 'user', 'I switched to neovim')", &[&user]).unwrap().get(0);
        for (object, content) in [("vim", "Uses vim"), ("neovim", "Uses neovim")] {
            c.query(
                "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'editor', $2, $3, $4::vector, model => 'dump8', source_turn_id => $5)",
                &[&user, &object, &content, &Vector::from(rng.vector(8)), &turn],
            )
            .unwrap();
        }
        for i in 0..20 {
            c.query(
                "SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector, model => 'dump8', kind => 'episodic')",
                &[&user, &format!("episode {i} of {user}"), &Vector::from(rng.vector(8))],
            )
            .unwrap();
        }
    }
    c.batch_execute("SELECT * FROM agent_memory.memory_forget()").unwrap();
    let before = counts(&mut c);
    assert!(before.iter().all(|(_, n)| *n > 0), "every table has rows before the dump: {before:?}");
    let q = rng.vector(8);
    let recalled_before: Vec<_> = ["dump-a", "dump-b", "dump-c"].iter().map(|u| recall_ids(&mut c, u, &q)).collect();
    let max_id: i64 = c.query_one("SELECT max(id) FROM agent_memory.memories", &[]).unwrap().get(0);

    let dir = std::env::temp_dir().join(format!("agent_memory_dump_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("db.dump");
    let bin = bindir();
    let status = Command::new(format!("{bin}/pg_dump"))
        .args(server_args())
        .args(["-Fc", "-f", file.to_str().unwrap(), "agent_memory_dump_src"])
        .status()
        .unwrap();
    assert!(status.success(), "pg_dump failed");
    // The data-only dump of the memories table alone holds its rows too.
    let data_only = Command::new(format!("{bin}/pg_dump"))
        .args(server_args())
        .args(["--data-only", "-t", "agent_memory.memories", "agent_memory_dump_src"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&data_only.stdout);
    assert!(text.contains("COPY agent_memory.memories"), "a data-only dump of agent_memory.memories has its rows");
    assert!(text.contains("Uses neovim"));

    let mut admin = connect("postgres");
    admin.batch_execute("DROP DATABASE IF EXISTS agent_memory_dump_dst WITH (FORCE)").unwrap();
    admin.batch_execute("CREATE DATABASE agent_memory_dump_dst").unwrap();
    let out = Command::new(format!("{bin}/pg_restore"))
        .args(server_args())
        .args(["--exit-on-error", "-d", "agent_memory_dump_dst", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "pg_restore failed: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).ok();

    let mut r = connect("agent_memory_dump_dst");
    assert_eq!(counts(&mut r), before, "the restored database has the same rows in every table");
    let recalled_after: Vec<_> = ["dump-a", "dump-b", "dump-c"].iter().map(|u| recall_ids(&mut r, u, &q)).collect();
    assert_eq!(recalled_after, recalled_before, "recall returns the same memories after the restore");
    // The supersession chain and the evidence links came along.
    let chained: i64 = r
        .query_one(
            "SELECT count(*) FROM agent_memory.memories o JOIN agent_memory.memories n ON n.id = o.superseded_by \
              WHERE o.object = 'vim' AND n.object = 'neovim' AND NOT o.active AND n.source_turn_id IS NOT NULL",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(chained, 3);
    // The rules are still in force: a new write is normalised, versioned, and numbered after the
    // restored rows (the sequences were restored too).
    let row = r
        .query_one(
            "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('dump-a', 'new', $1, 'dump8') \
             RETURNING id, version, importance, expires_at IS NOT NULL, abs(1 - public.vector_norm(emb)) < 1e-6",
            &[&Vector::from(vec![3.0f32; 8])],
        )
        .unwrap();
    assert!(row.get::<_, i64>(0) > max_id, "ids go on after the restored ones");
    assert_eq!(row.get::<_, i32>(1), 1);
    assert!(row.get::<_, bool>(3) && row.get::<_, bool>(4), "the write trigger filled expires_at and normalised the embedding");
    let err = r
        .query("INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ('dump-a', 'x', '[1,2,3]', 'dump8')", &[])
        .unwrap_err();
    assert_eq!(err.code().unwrap().code(), "22000", "the model's dimension is still enforced");
    let action: String = r
        .query_one(
            "SELECT action FROM agent_memory.memory_reconcile('dump-b', 'user', 'editor', 'helix', 'Uses helix', $1::vector, model => 'dump8')",
            &[&Vector::from(unit(rng.vector(8)))],
        )
        .unwrap()
        .get(0);
    assert_eq!(action, "UPDATE", "reconcile finds the restored fact by its key");
}

#[test]
fn a_statement_timeout_stops_a_large_batch() {
    let mut c = fresh_db("agent_memory_cancel");
    let dims = 96;
    let mut rng = Rng(5);
    // A user with many memories, so every free-text fact of the batch is compared with all of them.
    let mut w = c.copy_in("COPY agent_memory.memories (user_id, content, emb, embedding_model, importance) FROM STDIN").unwrap();
    use std::io::Write;
    for i in 0..30_000 {
        let v: Vec<String> = rng.vector(dims).iter().map(|x| format!("{x:.4}")).collect();
        writeln!(w, "cancel-user\tmemory {i}\t[{}]\tm96\t0.5", v.join(",")).unwrap();
    }
    w.finish().unwrap();
    let facts: Vec<serde_json::Value> =
        (0..30_000).map(|i| serde_json::json!({"content": format!("new fact {i}"), "emb": rng.vector(dims)})).collect();
    let batch = serde_json::Value::Array(facts).to_string();
    // Above the default limit of a batch (agent_memory.max_batch_facts), which a superuser raises.
    c.batch_execute("SET agent_memory.max_batch_facts = 100000; SET statement_timeout = '1s'").unwrap();
    let started = Instant::now();
    let err = c
        .query("SELECT count(*) FROM agent_memory.memory_reconcile_batch('cancel-user', $1::text::json, model => 'm96')", &[&batch])
        .expect_err("the batch is stopped by the timeout");
    let took = started.elapsed();
    assert_eq!(err.code().map(|s| s.code()), Some("57014"), "cancelled by statement_timeout: {err}");
    // Generous against a noisy machine; the whole batch takes many times longer.
    assert!(took < Duration::from_secs(5), "the batch stopped {took:?} after it started, with a 1 s timeout");
    c.batch_execute("RESET statement_timeout").unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'cancel-user'", &[]).unwrap().get(0);
    assert_eq!(n, 30_000, "nothing of the cancelled batch was written");
}

const WORKER_DB: &str = "agent_memory_workers";

fn worker_pid(c: &mut Client) -> Option<i32> {
    c.query_opt("SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory worker' AND datname = $1", &[&WORKER_DB])
        .unwrap()
        .map(|r| r.get(0))
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A database owner who is no superuser plants a search path and a hijacking operator, and sets
/// a capacity of 1 and a regret window of 0 for their database. The worker, restarted so that it
/// connects with those settings, runs its passes: it calls none of the owner's code, keeps the
/// server-wide capacity and regret window, and the owner stays no superuser.
#[test]
fn a_database_owner_cannot_steer_the_worker() {
    let mut admin = connect("postgres");
    admin
        .batch_execute(
            "DO $$ BEGIN
                 IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_owner') THEN CREATE ROLE am_owner LOGIN; END IF;
             END $$;
             ALTER ROLE am_owner NOSUPERUSER;",
        )
        .unwrap();
    // A run that failed half-way may have left the database's settings and owner behind.
    if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&WORKER_DB]).unwrap().is_some() {
        admin.batch_execute(&format!("ALTER DATABASE {WORKER_DB} RESET ALL; ALTER DATABASE {WORKER_DB} OWNER TO postgres")).unwrap();
    }
    let mut c = worker_database(WORKER_DB);
    c.batch_execute(
        "DROP SCHEMA IF EXISTS evil CASCADE; DROP OPERATOR IF EXISTS public.= (float8, int4);
         DROP FUNCTION IF EXISTS public.am_eq(float8, int4); DROP TABLE IF EXISTS public.am_calls;",
    )
    .unwrap();
    alter_system(&mut c, &[("workers_enabled", "off")]);
    admin.batch_execute(&format!("ALTER DATABASE {WORKER_DB} OWNER TO am_owner")).unwrap();
    c.batch_execute("CREATE TABLE public.am_calls (who text, what text); GRANT INSERT, SELECT ON public.am_calls TO PUBLIC;").unwrap();

    // What the owner plants, as the owner.
    let mut owner = Client::connect(&agent_memory_tests::params_as("am_owner", WORKER_DB), postgres::NoTls).unwrap();
    owner
        .batch_execute(&format!(
            "CREATE SCHEMA evil;
             CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO public.am_calls VALUES (current_user, 'clock_timestamp');
                 ALTER ROLE am_owner SUPERUSER;
                 RETURN pg_catalog.clock_timestamp();
             END $$;
             CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO public.am_calls VALUES (current_user, 'now');
                 ALTER ROLE am_owner SUPERUSER;
                 RETURN pg_catalog.now();
             END $$;
             CREATE FUNCTION public.am_eq(float8, int4) RETURNS boolean LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO public.am_calls VALUES (current_user, 'float8 = int4');
                 ALTER ROLE am_owner SUPERUSER;
                 RETURN $1 = $2::float8;
             END $$;
             CREATE OPERATOR public.= (LEFTARG = float8, RIGHTARG = int4, FUNCTION = public.am_eq);
             ALTER DATABASE {WORKER_DB} SET search_path = evil, pg_catalog, public;
             ALTER DATABASE {WORKER_DB} SET agent_memory.capacity = 1;
             ALTER DATABASE {WORKER_DB} SET agent_memory.regret_window = 0;"
        ))
        .unwrap();
    drop(owner);

    // Memories the passes have work on: 3 users × 12, with duplicates to merge and expired ones.
    let mut rng = Rng(3);
    let base = rng.vector(16);
    for u in 0..3 {
        let user = format!("owner-user-{u}");
        for i in 0..12 {
            let emb = if i < 4 { base.clone() } else { rng.vector(16) };
            let expires = if i == 11 { "2000-01-01" } else { "infinity" };
            let duplicate = i < 4;
            let subject = duplicate.then(|| format!("user{i}"));
            let predicate = duplicate.then_some("drinks");
            let object = duplicate.then_some("tea");
            c.execute(
                "INSERT INTO agent_memory.memories (user_id, subject, predicate, object, content, emb, embedding_model, expires_at, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'm16', $7::text::timestamptz, now() - interval '1 day')",
                &[&user, &subject, &predicate, &object, &format!("memory {i}"), &Vector::from(emb), &expires],
            )
            .unwrap();
        }
    }
    let total_before: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories", &[]).unwrap().get(0);

    // The worker reconnects, and so takes the database's settings; then it runs both passes.
    if let Some(pid) = worker_pid(&mut admin) {
        admin.execute("SELECT pg_terminate_backend($1)", &[&pid]).unwrap();
        wait_for("the worker to restart", Duration::from_secs(40), || worker_pid(&mut admin).is_some_and(|p| p != pid));
    }
    alter_system(&mut c, &[("workers_enabled", "on"), ("forget_interval", "1s"), ("consolidate_interval", "1s")]);
    let mut c = connect(WORKER_DB);
    wait_for("a forget and a consolidate run by the worker", Duration::from_secs(60), || {
        let n: i64 =
            c.query_one("SELECT count(DISTINCT job) FROM agent_memory.runs WHERE by_worker AND status = 'succeeded'", &[]).unwrap().get(0);
        n == 2
    });
    alter_system(&mut c, &[("workers_enabled", "off")]);

    let calls: Vec<(String, String)> =
        c.query("SELECT who, what FROM public.am_calls", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
    assert!(calls.is_empty(), "the worker called the database owner's code: {calls:?}");
    let is_super: bool = admin.query_one("SELECT rolsuper FROM pg_roles WHERE rolname = 'am_owner'", &[]).unwrap().get(0);
    assert!(!is_super, "the database owner became a superuser");
    // The server-wide capacity (400) and regret window (30 days) held: every user keeps its
    // memories but the expired one and the merged duplicates, and nothing was purged.
    let failed: Vec<String> = c
        .query("SELECT coalesce(error, '') FROM agent_memory.runs WHERE by_worker AND status = 'failed'", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(failed.is_empty(), "worker runs failed: {failed:?}");
    let total_after: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories", &[]).unwrap().get(0);
    assert!(total_after >= total_before, "the purge deleted rows with the database's regret window of 0");
    for u in 0..3 {
        let active: i64 = c
            .query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = $1 AND active", &[&format!("owner-user-{u}")])
            .unwrap()
            .get(0);
        assert!(active >= 8, "user {u} has {active} active memories: the database's capacity of 1 was applied");
    }
    let expired: i64 =
        c.query_one("SELECT count(*) FROM agent_memory.memories WHERE NOT active AND retired_reason = 'expired'", &[]).unwrap().get(0);
    assert_eq!(expired, 3, "the passes did run: the expired memories were retired");

    // Clean up: the database goes back to the server's owner and settings.
    admin.batch_execute(&format!("ALTER DATABASE {WORKER_DB} RESET ALL; ALTER DATABASE {WORKER_DB} OWNER TO postgres")).unwrap();
    c.batch_execute("DROP SCHEMA evil CASCADE; DROP OPERATOR public.= (float8, int4); DROP FUNCTION public.am_eq(float8, int4); DROP TABLE public.am_calls")
        .unwrap();
    admin.batch_execute("DROP ROLE am_owner").unwrap();
    reset_system(&mut c, &["forget_interval", "consolidate_interval", "workers_enabled"]);
    if let Some(pid) = worker_pid(&mut admin) {
        admin.execute("SELECT pg_terminate_backend($1)", &[&pid]).unwrap();
    }
}

/// A role that may only connect holds the lock keys it can compute (the extension's salt is
/// secret to it): forgetting still runs, and a user's writes are not held up.
#[test]
fn a_role_with_only_connect_can_stall_nothing() {
    let db = "agent_memory_locks";
    let mut c = fresh_db(db);
    c.batch_execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_connect_only') THEN CREATE ROLE am_connect_only LOGIN; END IF; END $$;",
    )
    .unwrap();
    let mut intruder = Client::connect(&agent_memory_tests::params_as("am_connect_only", db), postgres::NoTls).unwrap();
    // The salt is not theirs to read.
    let err = intruder.query("SELECT salt FROM agent_memory.lock_salt", &[]).unwrap_err();
    assert_eq!(err.code().map(|s| s.code()), Some("42501"));
    // The keys they can compute, with any seed they might guess, held for the session.
    for seed in [0i64, 1, 42] {
        for name in ["agent_memory.job:forget", "agent_memory.job:consolidate", "agent_memory.user:victim"] {
            intruder.execute("SELECT pg_advisory_lock(hashtextextended($1, $2))", &[&name, &seed]).unwrap();
        }
    }
    c.batch_execute("SET statement_timeout = '5s'").unwrap();
    let steps = c.query("SELECT step FROM agent_memory.memory_forget()", &[]).expect("forgetting is not held up");
    assert_eq!(steps.len(), 4);
    c.query("SELECT step FROM agent_memory.memory_consolidate()", &[]).expect("consolidation is not held up");
    let action: String = c
        .query_one("SELECT action FROM agent_memory.memory_reconcile('victim', NULL, NULL, NULL, 'Likes tea', '[1,0,0,0]'::vector)", &[])
        .expect("the user's writes are not held up")
        .get(0);
    assert_eq!(action, "ADD");
    c.query_one("SELECT agent_memory.memory_record_turn('victim', 's', 'user', 'hello')", &[]).expect("turns are not held up");
    drop(intruder);
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)")).unwrap();
    admin.batch_execute("DROP ROLE am_connect_only").unwrap();
}

/// The archive's bound finds the rows it retires by their place alone: statistics taken while
/// every `archived_at` was NULL once made it a nested loop over the whole table for each chosen
/// row (minutes per batch); now each batch is a TID scan. 30,000 memories, 27,000 archived after
/// the last ANALYZE, a capacity of 100: the pass ends well inside a 30 s timeout.
#[test]
fn the_archive_bound_stays_fast_on_stale_statistics() {
    let mut c = fresh_db("agent_memory_archive_plan");
    c.batch_execute("ALTER TABLE agent_memory.memories SET (autovacuum_enabled = off)").unwrap();
    let mut w = c.copy_in("COPY agent_memory.memories (user_id, content, emb, embedding_model, kind) FROM STDIN").unwrap();
    use std::io::Write;
    let mut rng = Rng(77);
    for i in 0..30_000 {
        let v: Vec<String> = rng.vector(4).iter().map(|x| format!("{x:.4}")).collect();
        writeln!(w, "arch-1\tepisode {i}\t[{}]\ta4\tepisodic", v.join(",")).unwrap();
    }
    w.finish().unwrap();
    c.batch_execute("ANALYZE agent_memory.memories").unwrap();
    c.batch_execute("UPDATE agent_memory.memories SET archived_at = now() - interval '1 day' WHERE id % 10 <> 0").unwrap();
    c.batch_execute("SET agent_memory.archive_capacity = 100; SET statement_timeout = '30s'").unwrap();
    c.batch_execute("SELECT * FROM agent_memory.memory_forget()").unwrap();
    c.batch_execute("RESET statement_timeout").unwrap();
    let archived: i64 =
        c.query_one("SELECT count(*) FROM agent_memory.memories WHERE active AND archived_at IS NOT NULL", &[]).unwrap().get(0);
    assert_eq!(archived, 100, "the archive is kept to its capacity");
}
