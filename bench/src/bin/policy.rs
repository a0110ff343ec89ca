//! What the tenant policy costs a writer role: recall, reconcile and a plain read of one user's
//! rows, as an application role that sees only its user (`agent_memory.user_id`), under three
//! forms of the policy on the same data, in the same run, taken in turn round by round:
//!
//! * `0.9.0`: `user_id = (SELECT session_user_id())` with 0.9.0's SQL function: a subquery,
//!   evaluated once per statement (Citus cannot distribute a table with such a policy);
//! * `per row, SQL`: the same SQL function called without the subquery: evaluated per row;
//! * `0.10.0`: `user_id = agent_memory.session_user_id()`, the library's function, which keeps
//!   its answer for the statement's snapshot.
//!
//! 100 users × 500 memories (128 dimensions), written interleaved as real traffic writes them.
//! Run through `bench/run.sh policy`, which starts the server.

use std::time::{Duration, Instant};

use agent_memory_bench::{percentile_ms, table};
use agent_memory_tests::{fresh_db, params_as, Rng};
use pgvector::Vector;
use postgres::{Client, NoTls};

const DB: &str = "am_bench_policy";
const USERS: usize = 100;
const PER_USER: usize = 500;
const DIMS: usize = 128;
const ROUNDS: usize = 8;
const CALLS: usize = 50;

/// 0.9.0's `session_user_id()`, verbatim, under another name.
const OLD_FUNCTION: &str = "
CREATE SCHEMA bench_policy;
CREATE FUNCTION bench_policy.session_user_id() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH mine AS (
        SELECT b.user_pattern FROM agent_memory.role_users b JOIN pg_catalog.pg_roles r ON r.rolname = b.role_name
         WHERE pg_catalog.pg_has_role(r.oid, 'MEMBER'))
    SELECT s.u FROM (SELECT NULLIF(pg_catalog.current_setting('agent_memory.user_id', true), '') AS u) s
     WHERE NOT EXISTS (SELECT 1 FROM mine) OR EXISTS (SELECT 1 FROM mine WHERE s.u LIKE mine.user_pattern)
$$;
GRANT USAGE ON SCHEMA bench_policy TO PUBLIC;
GRANT EXECUTE ON FUNCTION bench_policy.session_user_id() TO PUBLIC;";

const FORMS: [(&str, &str); 3] = [
    ("0.9.0: (SELECT f()), SQL", "(SELECT bench_policy.session_user_id())"),
    ("per row, SQL", "bench_policy.session_user_id()"),
    ("0.10.0: f(), the library's", "agent_memory.session_user_id()"),
];

fn set_policy(admin: &mut Client, expr: &str) {
    for t in ["memories", "turns", "tasks", "predicate_declarations"] {
        admin
            .batch_execute(&format!(
                "ALTER POLICY tenant ON agent_memory.{t} USING (user_id OPERATOR(pg_catalog.=) {expr}) \
                 WITH CHECK (user_id OPERATOR(pg_catalog.=) {expr})"
            ))
            .unwrap();
    }
}

fn main() {
    let mut admin = fresh_db(DB);
    admin.batch_execute(OLD_FUNCTION).unwrap();
    admin
        .batch_execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bench_policy_writer') THEN \
               CREATE ROLE bench_policy_writer LOGIN; END IF; END $$;
             SELECT agent_memory.grant_access('bench_policy_writer', 'writer');",
        )
        .unwrap();
    // Interleaved: row i belongs to user i mod USERS.
    let mut rng = Rng(7);
    let t = Instant::now();
    for chunk in 0..PER_USER / 50 {
        let mut users = Vec::new();
        let mut predicates: Vec<Option<String>> = Vec::new();
        let mut contents = Vec::new();
        let mut embs = Vec::new();
        for i in 0..50 * USERS {
            users.push(format!("pu-{:03}", i % USERS));
            // Each user's first 40 memories are keyed facts (one active fact per key).
            let nth = chunk * 50 + i / USERS;
            predicates.push((nth < 40).then(|| format!("p{nth}")));
            contents.push(format!("memory {nth}: {}", rng.next_u64()));
            embs.push(Vector::from(rng.vector(DIMS)));
        }
        admin
            .execute(
                "INSERT INTO agent_memory.memories (user_id, subject, predicate, object, content, emb, embedding_model) \
                 SELECT u, CASE WHEN p IS NOT NULL THEN 'user' END, p, CASE WHEN p IS NOT NULL THEN 'v' || n END, c, e, 'b128' \
                   FROM unnest($1::text[], $2::text[], $3::text[], $4::vector[]) WITH ORDINALITY AS x(u, p, c, e, n)",
                &[&users, &predicates, &contents, &embs],
            )
            .unwrap();
    }
    admin.batch_execute("VACUUM ANALYZE agent_memory.memories").unwrap();
    println!("loaded {} memories in {:.1} s", USERS * PER_USER, t.elapsed().as_secs_f64());

    let mut w = Client::connect(&params_as("bench_policy_writer", DB), NoTls).unwrap();
    let recall = w.prepare("SELECT count(*) FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'b128')").unwrap();
    let reconcile = w
        .prepare("SELECT action FROM agent_memory.memory_reconcile($1, 'user', 'p' || $3::text, $4, $4, $2::vector, model => 'b128')")
        .unwrap();
    let read = w.prepare("SELECT count(*) FROM agent_memory.memories WHERE user_id = $1 AND active").unwrap();
    // times[form][call kind]
    let mut times: Vec<[Vec<Duration>; 3]> = (0..FORMS.len()).map(|_| [Vec::new(), Vec::new(), Vec::new()]).collect();
    for round in 0..ROUNDS {
        for (f, (_, expr)) in FORMS.iter().enumerate() {
            set_policy(&mut admin, expr);
            for call in 0..CALLS {
                let user = format!("pu-{:03}", (round * CALLS + call) % USERS);
                w.batch_execute(&format!("SET agent_memory.user_id = '{user}'")).unwrap();
                let q = Vector::from(rng.vector(DIMS));
                let t = Instant::now();
                let n: i64 = w.query_one(&recall, &[&user, &q]).unwrap().get(0);
                times[f][0].push(t.elapsed());
                assert_eq!(n, 10, "recall as the writer found {n} rows");
                let t = Instant::now();
                let p = format!("{}", call % 40);
                let o = format!("value {round} {call}");
                w.query(&reconcile, &[&user, &q, &p, &o]).unwrap();
                times[f][1].push(t.elapsed());
                let t = Instant::now();
                let n: i64 = w.query_one(&read, &[&user]).unwrap().get(0);
                times[f][2].push(t.elapsed());
                assert!(n >= PER_USER as i64, "the writer read {n} rows of its user");
            }
        }
    }
    set_policy(&mut admin, FORMS[2].1);
    let mut rows = Vec::new();
    for (f, (name, _)) in FORMS.iter().enumerate() {
        let mut row = vec![name.to_string()];
        for kind in &times[f] {
            let mut v = kind.clone();
            v.sort();
            row.push(format!("{:.3} / {:.3}", percentile_ms(&v, 0.5), percentile_ms(&v, 0.95)));
        }
        rows.push(row);
    }
    let mut out = format!(
        "## The tenant policy as a writer role ({USERS} users × {PER_USER} memories, {DIMS}-d, interleaved; {} calls of each kind per form)\n\n",
        ROUNDS * CALLS
    );
    out += &table(
        &[
            "policy",
            "memory_recall k=10, p50 / p95 ms",
            "memory_reconcile (a keyed fact), p50 / p95 ms",
            "read of the user's active rows, p50 / p95 ms",
        ],
        &rows,
    );
    if let Ok(path) = std::env::var("BENCH_OUT") {
        std::fs::write(path, out).unwrap();
    }
}
