//! agent_memory on a real Citus cluster (a coordinator and two workers, started by
//! tests/citus.sh): `agent_memory.distribute()`, and every per-user call made through the
//! coordinator against the same calls on one server (a database of the test server, with the
//! extension and without Citus).
//!
//! These tests need the cluster, so they are `#[ignore]`d in the out-of-process tier and run by
//! the Citus tier (`cargo test --test citus -- --ignored`), which sets `AGENT_MEMORY_CITUS_HOST`,
//! `AGENT_MEMORY_CITUS_PORT` (the coordinator's; the workers' are the next two) and
//! `AGENT_MEMORY_CITUS_DB`. Each test writes users of its own.

use std::collections::BTreeMap;

use agent_memory_tests::{fresh_db, Rng};
use pgvector::Vector;
use postgres::{Client, NoTls};

const DIMS: usize = 16;

fn cluster_env() -> (String, u16, String) {
    let host =
        std::env::var("AGENT_MEMORY_CITUS_HOST").expect("AGENT_MEMORY_CITUS_HOST is not set: run these tests through tests/citus.sh");
    let port: u16 = std::env::var("AGENT_MEMORY_CITUS_PORT").expect("AGENT_MEMORY_CITUS_PORT").parse().unwrap();
    let db = std::env::var("AGENT_MEMORY_CITUS_DB").expect("AGENT_MEMORY_CITUS_DB");
    (host, port, db)
}

/// Node `n` of the cluster: 0 is the coordinator, 1 and 2 the workers.
fn node(n: u16) -> Client {
    let (host, port, db) = cluster_env();
    Client::connect(&format!("host={host} port={} user=postgres dbname={db}", port + n), NoTls)
        .unwrap_or_else(|e| panic!("connecting to node {n}: {e}"))
}

/// The coordinator, with the schema distributed (distribute() is idempotent) and the tests'
/// model registered (a model is registered through the coordinator before a delegated call
/// writes memories of it: docs/scale-out.md).
fn coordinator() -> Client {
    let mut c = node(0);
    c.batch_execute(
        "SET client_min_messages = warning; SELECT count(*) FROM agent_memory.distribute();
         SELECT agent_memory.register_model('m16', 16)",
    )
    .unwrap();
    c
}

/// One server: a database of the test server with the extension (no Citus), and the model.
fn single(name: &str) -> Client {
    let mut c = fresh_db(name);
    c.batch_execute("SELECT agent_memory.register_model('m16', 16)").unwrap();
    c
}

fn emb(rng: &mut Rng) -> Vector {
    Vector::from(rng.vector(DIMS))
}

const WORDS: [&str; 12] =
    ["garden", "tomato", "invoice", "refund", "lisbon", "guitar", "marathon", "sister", "dentist", "python", "coffee", "winter"];

/// The same writes, on whichever server `c` is: facts, free text and turns of `users` users.
fn write_users(c: &mut Client, prefix: &str, users: usize, per_user: usize, seed: u64) {
    let mut rng = Rng(seed);
    for u in 0..users {
        let user = format!("{prefix}-{u:03}");
        for i in 0..per_user {
            let w1 = WORDS[(rng.next_u64() % WORDS.len() as u64) as usize];
            let w2 = WORDS[(rng.next_u64() % WORDS.len() as u64) as usize];
            let content = format!("note {i} about {w1} and {w2}");
            let e = emb(&mut rng);
            if i % 5 == 0 {
                c.query(
                    "SELECT * FROM agent_memory.memory_reconcile($1, 'user', $2, $3, $4, $5::vector, model => 'm16')",
                    &[&user, &format!("likes_{}", i % 3), &w1, &content, &e],
                )
                .unwrap();
            } else {
                c.query(
                    "SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector, model => 'm16')",
                    &[&user, &content, &e],
                )
                .unwrap();
            }
        }
        c.query(
            "SELECT agent_memory.memory_record_turn($1, 's1', 'user', $2)",
            &[&user, &format!("what about the {} of {user}?", WORDS[u % 12])],
        )
        .unwrap();
    }
}

/// (content, similarity rounded) of a recall, in rank order.
fn recall(c: &mut Client, user: &str, q: Option<&Vector>, text: Option<&str>, k: i32) -> Vec<(String, Option<i64>)> {
    c.query(
        "SELECT content, similarity FROM agent_memory.memory_recall($1, $2::vector, $3, model => 'm16', query_text => $4, touch => false)",
        &[&user, &q, &k, &text],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get::<_, Option<f64>>(1).map(|s| (s * 1e6).round() as i64)))
    .collect()
}

fn context(c: &mut Client, user: &str, q: &Vector, text: &str) -> Vec<(String, String)> {
    c.query(
        "SELECT channel, content FROM agent_memory.memory_context($1, 's1', $2::vector, $3, token_budget => 400, model => 'm16', touch => false) ORDER BY position",
        &[&user, q, &text],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Rows of `user` in each shard of `table`, by the port of the node that holds the shard.
fn rows_by_node(c: &mut Client, table: &str, user: Option<&str>) -> BTreeMap<i32, i64> {
    let filter = match user {
        Some(u) => format!(" WHERE user_id = {}", quote(u)),
        None => String::new(),
    };
    let sql = format!(
        "SELECT n.nodeport, sum(r.result::bigint)::bigint
           FROM run_command_on_shards('{table}', $cmd$SELECT count(*) FROM %s{filter}$cmd$) r
           JOIN pg_dist_placement s ON s.shardid = r.shardid JOIN pg_dist_node n USING (groupid)
          GROUP BY n.nodeport ORDER BY 1"
    );
    c.query(&sql, &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The worker (1 or 2) whose shards hold `user`.
fn holder(c: &mut Client, user: &str) -> u16 {
    let (_, base, _) = cluster_env();
    let port: i32 = c
        .query_one(
            "SELECT n.nodeport FROM pg_dist_placement s JOIN pg_dist_node n USING (groupid)
              WHERE s.shardid = get_shard_id_for_distribution_column('agent_memory.memories', $1::text)",
            &[&user],
        )
        .unwrap()
        .get(0);
    (port - base as i32) as u16
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn distribute_places_every_per_user_table_and_delegates_the_calls_idempotently() {
    let mut c = node(0);
    c.batch_execute("SET client_min_messages = warning").unwrap();
    let first: Vec<(String, String, String)> =
        c.query("SELECT * FROM agent_memory.distribute()", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    let again: Vec<(String, String, String)> =
        c.query("SELECT * FROM agent_memory.distribute()", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    assert_eq!(first.len(), again.len());
    assert!(again.iter().all(|(_, _, done)| done == "already" || done == "kept"), "a second run does it all again: {again:?}");
    let kinds: BTreeMap<String, String> = c
        .query(
            "SELECT logicalrelid::regclass::text, partmethod::text FROM pg_dist_partition
              WHERE logicalrelid::regclass::text LIKE 'agent_memory.%' ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for t in ["turns", "memories", "tasks", "predicate_declarations", "memory_packs", "memory_pack_users", "memory_pack_stale"] {
        assert_eq!(kinds.get(&format!("agent_memory.{t}")).map(String::as_str), Some("h"), "{t} is distributed by hash: {kinds:?}");
    }
    for t in ["embedding_models", "predicates"] {
        assert_eq!(kinds.get(&format!("agent_memory.{t}")).map(String::as_str), Some("n"), "{t} is a reference table: {kinds:?}");
    }
    for t in ["runs", "maintenance_state", "erasures", "embedding_cache", "role_users", "lock_salt"] {
        assert!(!kinds.contains_key(&format!("agent_memory.{t}")), "{t} stays each node's own");
    }
    assert!(first.iter().any(|(o, _, d)| o == "agent_memory.role_users" && d == "kept"), "{first:?}");
    // Every worker numbers ids in a range of its own (its group id times 2^48).
    for w in [1u16, 2] {
        let (min, group): (i64, i32) = {
            let mut c = node(w);
            let r = c
                .query_one(
                    "SELECT s.min_value, (SELECT groupid FROM pg_dist_local_group) FROM pg_sequences s
                      WHERE s.schemaname = 'agent_memory' AND s.sequencename = 'memories_id_seq'",
                    &[],
                )
                .unwrap();
            (r.get(0), r.get(1))
        };
        assert_eq!(min, ((group as i64) << 48) + 1, "worker {w}'s range of memory ids");
    }
    // The receipt key is the coordinator's on every node.
    let key = |n: u16| -> Vec<u8> { node(n).query_one("SELECT receipt_key FROM agent_memory.lock_salt", &[]).unwrap().get(0) };
    assert_eq!(key(1), key(0));
    assert_eq!(key(2), key(0));
    // One colocation group: a user's rows of every table are on one node.
    let groups: i64 = c
        .query_one(
            "SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE partmethod = 'h'
                AND logicalrelid::regclass::text LIKE 'agent_memory.%'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(groups, 1);
    let delegated: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
              WHERE o.classid = 'pg_proc'::regclass AND p.pronamespace = 'agent_memory'::regnamespace
                AND o.distribution_argument_index = 0 AND o.force_delegation",
            &[],
        )
        .unwrap()
        .get(0);
    // recall ×3, context ×3, context_text ×3, reconcile ×3, batch ×3, record_turn, erase, pack.
    assert_eq!(delegated, 18);
    // On a worker it refuses: distribution is the coordinator's.
    let err = node(1).query("SELECT * FROM agent_memory.distribute()", &[]).unwrap_err();
    assert_eq!(err.code().map(|s| s.code()), Some("55000"), "{err}");
    assert!(err.as_db_error().unwrap().hint().is_some_and(|h| h.contains("coordinator")), "{err}");
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn every_per_user_call_through_the_coordinator_answers_as_one_server_does() {
    let mut cl = coordinator();
    let mut single = single("am_it_citus_same");
    let users = 40;
    write_users(&mut cl, "same", users, 20, 11);
    write_users(&mut single, "same", users, 20, 11);
    let spread: std::collections::BTreeSet<u16> = (0..users).map(|u| holder(&mut cl, &format!("same-{u:03}"))).collect();
    assert_eq!(spread.len(), 2, "the users are on both workers");
    let mut rng = Rng(5);
    let mut compare = |cl: &mut Client, single: &mut Client, what: &str| {
        for u in 0..users {
            let user = format!("same-{u:03}");
            let q = emb(&mut rng);
            let text = format!("{} {}", WORDS[u % 12], WORDS[(u + 5) % 12]);
            let v = recall(cl, &user, Some(&q), None, 5);
            assert_eq!(v.len(), 5, "{what}: vector recall of {user} finds its memories on the cluster");
            assert_eq!(v, recall(single, &user, Some(&q), None, 5), "{what}: vector recall of {user}");
            let h = recall(cl, &user, Some(&q), Some(&text), 8);
            assert_eq!(h, recall(single, &user, Some(&q), Some(&text), 8), "{what}: hybrid recall of {user}");
            let kw = recall(cl, &user, None, Some(&text), 8);
            assert!(!kw.is_empty(), "{what}: keyword recall of {user} finds its words");
            assert_eq!(kw, recall(single, &user, None, Some(&text), 8), "{what}: keyword recall of {user}");
            let ctx = context(cl, &user, &q, &text);
            assert!(ctx.iter().any(|(ch, _)| ch == "working"), "{what}: context of {user} holds its turn: {ctx:?}");
            assert_eq!(ctx, context(single, &user, &q, &text), "{what}: memory_context of {user}");
        }
    };
    compare(&mut cl, &mut single, "rows");
    // Packed users read their packs, on the node that holds them.
    for u in 0..users {
        let user = format!("same-{u:03}");
        let a: i64 = cl.query_one("SELECT agent_memory.memory_pack($1, 'm16')", &[&user]).unwrap().get(0);
        let b: i64 = single.query_one("SELECT agent_memory.memory_pack($1, 'm16')", &[&user]).unwrap().get(0);
        assert_eq!(a, b, "packs of {user}");
    }
    let packs: i64 = rows_by_node(&mut cl, "agent_memory.memory_packs", None).values().sum();
    assert!(packs > 0, "the packs are in the shards");
    compare(&mut cl, &mut single, "packs");

    // memory_stats, per user, through the coordinator.
    let stats = |c: &mut Client| -> Vec<(String, i64, i64)> {
        c.query("SELECT user_id, active, retired FROM agent_memory.memory_stats WHERE user_id LIKE 'same-%' ORDER BY 1", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    };
    let s = stats(&mut cl);
    assert_eq!(s.len(), users);
    assert_eq!(s, stats(&mut single));
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn reconcile_keys_versions_and_polarity_work_as_on_one_server() {
    let mut cl = coordinator();
    let mut single = single("am_it_citus_reconcile");
    let run = |c: &mut Client| -> Vec<String> {
        let user = "rec-user";
        c.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
        let out = std::cell::RefCell::new(Vec::new());
        let step = |c: &mut Client, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]| match c.query(sql, params) {
            Ok(rows) => out.borrow_mut().push(
                rows.iter()
                    .map(|r| format!("{}/{:?}", r.get::<_, String>("action"), r.get::<_, Option<i32>>("version")))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            Err(e) => out.borrow_mut().push(format!(
                "error {}: {}",
                e.code().map(|s| s.code()).unwrap_or("?"),
                e.as_db_error().map(|d| d.message()).unwrap_or("")
            )),
        };
        let e1 = Vector::from(vec![1.0f32; DIMS]);
        step(
            c,
            "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'city', 'Porto', 'Lives in Porto', $2::vector, model => 'm16')",
            &[&user, &e1],
        );
        step(
            c,
            "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'city', 'Porto', 'Lives in Porto', $2::vector, model => 'm16')",
            &[&user, &e1],
        );
        step(
            c,
            "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'city', 'Lisbon', 'Lives in Lisbon', $2::vector, model => 'm16')",
            &[&user, &e1],
        );
        step(c, "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'city', 'Lisbon', 'No longer in Lisbon', $2::vector, model => 'm16', negate => true)", &[&user, &e1]);
        step(
            c,
            "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'pet', 'cat', 'Has a cat', $2::vector, model => 'm16')",
            &[&user, &e1],
        );
        // A write that names the version it read: the current one, then a stale one.
        let (id, version): (i64, i32) = {
            let r = c
                .query_one("SELECT id, version FROM agent_memory.memories WHERE user_id = $1 AND object = 'cat' AND active", &[&user])
                .unwrap_or_else(|e| panic!("{e}: no active pet fact after {:?}", out.borrow()));
            (r.get(0), r.get(1))
        };
        step(c, "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'pet', 'dog', 'Has a dog', $2::vector, model => 'm16', action => 'UPDATE', target_id => $3, expected_version => $4)", &[&user, &e1, &id, &version]);
        step(c, "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'pet', 'fish', 'Has a fish', $2::vector, model => 'm16', action => 'UPDATE', target_id => $3, expected_version => $4)", &[&user, &e1, &id, &version]);
        // Many values of one predicate, and a batch.
        step(c, "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'speaks', 'Portuguese', 'Speaks Portuguese', $2::vector, model => 'm16', cardinality => 'many')", &[&user, &e1]);
        step(
            c,
            "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'speaks', 'English', 'Speaks English', $2::vector, model => 'm16')",
            &[&user, &e1],
        );
        let batch = serde_json::json!([
            {"subject": "user", "predicate": "city", "object": "Braga", "content": "Moved to Braga", "emb": vec![0.5f32; DIMS]},
            {"subject": "user", "predicate": "speaks", "object": "English", "content": "Speaks English", "emb": vec![1.0f32; DIMS]},
            {"content": "Met Ana at the market", "emb": vec![0.25f32; DIMS]}
        ]);
        step(c, "SELECT * FROM agent_memory.memory_reconcile_batch($1, $2::text::jsonb, 'm16')", &[&user, &batch.to_string()]);
        let facts: Vec<String> = c
            .query("SELECT coalesce(predicate, '') || '=' || coalesce(object, '') || ':' || active || ':' || version FROM agent_memory.memories WHERE user_id = $1 ORDER BY 1", &[&user])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        out.borrow_mut().push(facts.join(" "));
        out.into_inner()
    };
    let a = run(&mut cl);
    let b = run(&mut single);
    assert_eq!(a, b);
    assert!(a.iter().any(|s| s == "NONE/None"), "the stale version changes nothing: {a:?}");
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn users_spread_over_both_workers_and_each_call_runs_on_the_users_worker() {
    let mut cl = coordinator();
    let mut rng = Rng(200);
    for u in 0..120 {
        let user = format!("spread-{u:03}");
        let facts: Vec<serde_json::Value> =
            (0..3).map(|i| serde_json::json!({"content": format!("spread fact {i} of {user}"), "emb": rng.vector(DIMS)})).collect();
        cl.query(
            "SELECT * FROM agent_memory.memory_reconcile_batch($1, $2::text::jsonb, 'm16')",
            &[&user, &serde_json::Value::from(facts).to_string()],
        )
        .unwrap();
    }
    let mut total = 0;
    let mut nodes = 0;
    let mut users_at: BTreeMap<u16, usize> = BTreeMap::new();
    for u in 0..120 {
        *users_at.entry(holder(&mut cl, &format!("spread-{u:03}"))).or_default() += 1;
    }
    for (w, users) in &users_at {
        assert!(*users > 20, "worker {w} holds {users} of the 120 users");
    }
    // Ids are unique across the nodes (each numbers in its own range).
    let (n, distinct): (i64, i64) = {
        let r = cl.query_one("SELECT count(*), count(DISTINCT id) FROM agent_memory.memories WHERE user_id LIKE 'spread-%'", &[]).unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((n, distinct), (360, 360));
    for (_, n) in rows_by_node(&mut cl, "agent_memory.memories", None) {
        total += n;
        nodes += 1;
    }
    assert_eq!(nodes, 2, "both workers hold rows");
    assert!(total >= 360);
    // A recall through the coordinator runs on the worker that holds its user: that worker
    // counts the calls of memory_recall (track_functions), the other none.
    let calls = |n: u16| -> i64 {
        node(n)
            .query_one("SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions WHERE funcname = 'memory_recall'", &[])
            .unwrap()
            .get(0)
    };
    // Waits for the workers' sessions to report their counts (they do within seconds of going idle).
    let settled = |n: u16, want: i64| -> i64 {
        let mut got = calls(n);
        for _ in 0..150 {
            if got >= want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            got = calls(n);
        }
        got
    };
    for user in ["spread-007", "spread-100", "spread-111"] {
        let at = holder(&mut cl, user);
        let other = 3 - at;
        // The coordinator's plan sends the call, whole, to the worker that holds the user.
        let plan: Vec<String> = cl
            .query(
                &format!(
                    "EXPLAIN (COSTS OFF) SELECT * FROM agent_memory.memory_recall({}, '[{}]'::vector, 3, model => 'm16')",
                    quote(user),
                    vec!["0.25"; DIMS].join(",")
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let (_, base, _) = cluster_env();
        assert!(plan.iter().any(|l| l.contains(&format!("port={}", base + at))), "{user} on worker {at}: {plan:?}");
        assert!(plan.iter().any(|l| l.contains("Function Scan on memory_recall")), "{plan:?}");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let (before_at, before_other) = (calls(at), calls(other));
        let q = Vector::from(rng.vector(DIMS));
        for _ in 0..5 {
            let n = cl.query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16')", &[&user, &q]).unwrap().len();
            assert_eq!(n, 3);
        }
        assert!(settled(at, before_at + 5) >= before_at + 5, "{user}'s recalls ran on worker {at}");
        // (The other worker's count is not compared: a session reports its counts up to seconds
        // after it goes idle, so an earlier call's may land in this window; the plan above
        // names the node.)
        let _ = before_other;
        // The same inside a transaction block (the calls are delegated with force_delegation).
        let mut tx = cl.transaction().unwrap();
        let n = tx.query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16')", &[&user, &q]).unwrap().len();
        tx.commit().unwrap();
        assert_eq!(n, 3, "recall of {user} inside a transaction block");
        // Called on the worker that does not hold the user, the call is sent on to the one that
        // does (every node has Citus's metadata).
        let n =
            node(other).query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16')", &[&user, &q]).unwrap().len();
        assert_eq!(n, 3, "recall of {user} called on worker {other}");
        // A call Citus does not send on (inside a larger query: here with a WHERE clause) refuses
        // there instead of reading the distributed table's empty shell; so it does on the
        // coordinator.
        let err = node(other)
            .query("SELECT count(*) FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16') r WHERE r.id > 0", &[&user, &q])
            .unwrap_err();
        let db = err.as_db_error().unwrap_or_else(|| panic!("{err}"));
        assert_eq!(db.code().code(), "0F000", "{}", db.message());
        assert!(db.message().contains("does not hold"), "{}", db.message());
        assert!(db.hint().is_some_and(|h| h.contains("statement of its own")));
        // So it does on the coordinator, which holds no user.
        let err = cl
            .query("SELECT count(*) FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16') r WHERE r.id > 0", &[&user, &q])
            .unwrap_err();
        assert_eq!(err.code().map(|s| s.code()), Some("0F000"), "{err}");
    }
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn concurrent_reconciles_of_one_key_through_the_coordinator_leave_one_active_row() {
    let mut cl = coordinator();
    let user = "race-user";
    cl.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
    let go = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|w| {
            let go = go.clone();
            std::thread::spawn(move || {
                let mut c = node(0);
                go.wait();
                for round in 0..5 {
                    let e = Vector::from(vec![(w + 1) as f32; DIMS]);
                    c.query(
                        "SELECT * FROM agent_memory.memory_reconcile($1, 'user', 'editor', $2, $3, $4::vector, model => 'm16')",
                        &[&"race-user", &format!("editor-{w}-{round}"), &format!("Uses editor {w}-{round}"), &e],
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let active: i64 = cl
        .query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = $1 AND predicate = 'editor' AND active", &[&user])
        .unwrap()
        .get(0);
    assert_eq!(active, 1);
    let all: i64 = cl.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = $1", &[&user]).unwrap().get(0);
    assert_eq!(all, 40, "every write is kept as a version");
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn erasure_through_the_coordinator_removes_the_user_from_every_node() {
    let mut cl = coordinator();
    write_users(&mut cl, "erase", 3, 12, 3);
    let user = "erase-001";
    cl.query("SELECT agent_memory.memory_pack($1, 'm16')", &[&user]).unwrap();
    let before: i64 = rows_by_node(&mut cl, "agent_memory.memories", Some(user)).values().sum();
    assert_eq!(before, 12);
    let receipt = cl.query_one("SELECT memories, turns FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
    assert_eq!((receipt.get::<_, i64>(0), receipt.get::<_, i64>(1)), (12, 1));
    for t in ["memories", "turns", "tasks", "memory_packs", "memory_pack_users", "memory_pack_stale", "predicate_declarations"] {
        let left: i64 = rows_by_node(&mut cl, &format!("agent_memory.{t}"), Some(user)).values().sum();
        assert_eq!(left, 0, "{t} keeps rows of the erased user");
    }
    // The other users are untouched.
    let others: i64 = rows_by_node(&mut cl, "agent_memory.memories", Some("erase-002")).values().sum();
    assert_eq!(others, 12);
    let none = recall(&mut cl, user, Some(&Vector::from(vec![1.0f32; DIMS])), None, 5);
    assert!(none.is_empty());
}

/// The embedding cache's entries of `user`'s scope on node `n` (each node keeps its own cache).
fn cached_of(n: u16, user: &str) -> i64 {
    node(n)
        .query_one(
            "SELECT count(*) FROM agent_memory.embedding_cache e, agent_memory.lock_salt s
              WHERE e.scope_hash = sha256(s.receipt_key || convert_to('user:' || $1, 'UTF8'))",
            &[&user],
        )
        .unwrap()
        .get(0)
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn a_users_words_are_cached_only_where_the_user_is_held_and_go_with_the_erasure() {
    let mut cl = coordinator();
    let user = "cache-001";
    cl.query("SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, 'Keeps a tortoise called Pebble')", &[&user]).unwrap();
    cl.query("SELECT id FROM agent_memory.memory_recall($1, 'what pet does the user keep?', 3, touch => false)", &[&user]).unwrap();
    // memory_embed is no per-user call: it runs on the coordinator, in the session's user's scope.
    cl.batch_execute(
        "SET agent_memory.user_id = 'cache-001'; SELECT agent_memory.memory_embed('asked on the coordinator'); RESET agent_memory.user_id",
    )
    .unwrap();
    let h = holder(&mut cl, user);
    assert!(cached_of(h, user) >= 2, "the holder caches the user's texts and questions");
    assert_eq!(cached_of(0, user), 0, "the coordinator keeps no copy of the user's words");
    assert_eq!(cached_of(3 - h, user), 0, "nor does the other worker");
    cl.query("SELECT * FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
    for n in 0..3 {
        assert_eq!(cached_of(n, user), 0, "node {n} keeps cache entries of the erased user");
    }
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn a_long_memorys_windows_are_made_and_read_on_its_users_worker_as_on_one_server() {
    let mut cl = coordinator();
    let mut single = single("am_citus_windows");
    // A long memory whose end is about something else than its start, and a short one, for
    // users on both workers; the windows made by the delegated write (SET LOCAL reaches the
    // worker), and the question about the end asked through the coordinator.
    let long = "The allotment by the river grows beans, leeks and three kinds of squash every summer. ".repeat(14)
        + &"The old sailing dinghy was sold to a fisherman in Galway for two hundred euros. ".repeat(6);
    let users: Vec<String> = (0..6).map(|i| format!("win-{i:03}")).collect();
    let mut workers = std::collections::BTreeSet::new();
    for u in &users {
        for c in [&mut cl, &mut single] {
            c.batch_execute("BEGIN; SET LOCAL agent_memory.embed_windows = 4").unwrap();
            c.query("SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2)", &[u, &long]).unwrap();
            c.query("SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, 'Keeps a rowing machine in the garage')", &[u])
                .unwrap();
            c.batch_execute("COMMIT").unwrap();
        }
        workers.insert(holder(&mut cl, u));
        let windows = |c: &mut Client| -> Option<i32> {
            c.query_one("SELECT cardinality(emb_windows) FROM agent_memory.memories WHERE user_id = $1 AND content = $2", &[u, &long])
                .unwrap()
                .get(0)
        };
        let made = windows(&mut cl);
        assert!(made.is_some_and(|n| n >= 1), "{u}: the holder's write made the windows: {made:?}");
        assert_eq!(made, windows(&mut single), "{u}: as many windows as on one server");
        let ask = |c: &mut Client| -> Vec<(String, String)> {
            c.batch_execute("BEGIN; SET LOCAL agent_memory.length_prior = 0").unwrap();
            let rows = c
                .query(
                    "SELECT left(content, 20), round(similarity::numeric, 4)::text
                       FROM agent_memory.memory_recall($1, 'who bought the sailing dinghy?', 2, touch => false)",
                    &[u],
                )
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            c.batch_execute("COMMIT").unwrap();
            rows
        };
        let found = ask(&mut cl);
        assert_eq!(found, ask(&mut single), "{u}: recall through the coordinator answers as one server does");
        assert!(found.first().is_some_and(|(c, _)| long.starts_with(c.as_str())), "{u}: the windows find the end: {found:?}");
    }
    assert_eq!(workers.len(), 2, "the users are on both workers");
    let base = cluster_env().1 as i32;
    for u in &users {
        let h = holder(&mut cl, u) as i32;
        let placed = rows_by_node(&mut cl, "agent_memory.memories", Some(u));
        assert_eq!(placed.into_iter().filter(|(_, n)| *n > 0).collect::<Vec<_>>(), vec![(base + h, 2)], "{u}: both rows on its worker");
    }
    for u in &users {
        cl.query("SELECT * FROM agent_memory.memory_erase($1)", &[u]).unwrap();
    }
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn turns_tasks_and_updates_by_id_through_the_coordinator_answer_as_one_server_does() {
    let mut cl = coordinator();
    let mut single = single("am_it_citus_tasks");
    let run = |c: &mut Client| -> Vec<String> {
        let user = "task-user";
        c.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
        let mut out = Vec::new();
        let t1: i64 =
            c.query_one("SELECT agent_memory.memory_record_turn($1, 'trip', 'user', 'We fly to Lisbon in May')", &[&user]).unwrap().get(0);
        c.query("SELECT agent_memory.memory_record_turn($1, 'trip', 'assistant', 'Noted: Lisbon in May')", &[&user]).unwrap();
        c.query("SELECT agent_memory.memory_record_turn($1, 'work', 'user', 'The invoice is due Friday', task_id => 'invoices')", &[&user])
            .unwrap();
        c.execute(
            "INSERT INTO agent_memory.tasks (user_id, task_id, parent_task_id) VALUES ($1, 'plan', NULL), ($1, 'trip', 'plan'), ($1, 'invoices', NULL)",
            &[&user],
        )
        .unwrap();
        // A cycle is refused by the trigger on the user's shard, as on one server.
        let cycle = c.execute("UPDATE agent_memory.tasks SET parent_task_id = 'trip' WHERE user_id = $1 AND task_id = 'plan'", &[&user]);
        out.push(format!("cycle: {:?}", cycle.map_err(|e| e.code().map(|s| s.code().to_string()))));
        let e = |x: f32| Vector::from((0..DIMS).map(|i| if i == 0 { 1.0 } else { x }).collect::<Vec<f32>>());
        for (content, task, x) in [
            ("Flight to Lisbon on May 3", "trip", 0.1f32),
            ("Budget for the trip is 900 euros", "plan", 0.2),
            ("Invoice 42 goes to ACME", "invoices", 0.3),
            ("Likes window seats", "", 0.15),
        ] {
            let task = (!task.is_empty()).then_some(task);
            c.query(
                "SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector, model => 'm16', task_id => $4, source_turn_id => $5)",
                &[&user, &content, &e(x), &task, &t1],
            )
            .unwrap();
        }
        let q = e(0.12);
        for (task, untasked) in [(Some("trip"), true), (Some("trip"), false), (Some("invoices"), true), (None, true)] {
            let got: Vec<String> = c
                .query(
                    "SELECT content FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'm16', touch => false, task_id => $3, untasked => $4)",
                    &[&user, &q, &task, &untasked],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            out.push(format!("recall {task:?} {untasked}: {got:?}"));
        }
        let ctx: Vec<String> = c
            .query(
                "SELECT channel || ':' || content FROM agent_memory.memory_context($1, 'trip', $2::vector, 'Lisbon flight', model => 'm16', task_id => 'trip', touch => false) ORDER BY position",
                &[&user, &q],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        out.push(format!("context: {ctx:?}"));
        // An update by id: the memory's own version, then the same version again (stale: NULL).
        let (id, version): (i64, i32) = {
            let r = c
                .query_one("SELECT id, version FROM agent_memory.memories WHERE user_id = $1 AND content LIKE 'Invoice 42%'", &[&user])
                .unwrap();
            (r.get(0), r.get(1))
        };
        let first: Option<i32> = c
            .query_one("SELECT agent_memory.memory_update($1, $2, content => 'Invoice 42 goes to ACME Ltd')", &[&id, &version])
            .unwrap()
            .get(0);
        let again: Option<i32> =
            c.query_one("SELECT agent_memory.memory_update($1, $2, content => 'Invoice 42 to nobody')", &[&id, &version]).unwrap().get(0);
        out.push(format!("update: {first:?} then {again:?}"));
        // Deleting a turn memories were drawn from is refused (23503), as on one server; deleting a
        // task leaves its children without a parent.
        let turn = c.execute("DELETE FROM agent_memory.turns WHERE user_id = $1 AND id = $2", &[&user, &t1]);
        out.push(format!("delete turn: {:?}", turn.map_err(|e| e.code().map(|s| s.code().to_string()))));
        c.execute("DELETE FROM agent_memory.tasks WHERE user_id = $1 AND task_id = 'plan'", &[&user]).unwrap();
        let rows: Vec<String> = c
            .query(
                "SELECT content || ' turn=' || (source_turn_id IS NOT NULL) || ' v' || version FROM agent_memory.memories WHERE user_id = $1 ORDER BY content",
                &[&user],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        out.push(format!("memories: {rows:?}"));
        let tasks: Vec<String> = c
            .query("SELECT task_id || '<' || coalesce(parent_task_id, '-') FROM agent_memory.tasks WHERE user_id = $1 ORDER BY 1", &[&user])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        out.push(format!("tasks: {tasks:?}"));
        let turns: i64 = c.query_one("SELECT count(*) FROM agent_memory.turns WHERE user_id = $1", &[&user]).unwrap().get(0);
        out.push(format!("turns: {turns}"));
        out
    };
    let a = run(&mut cl);
    let b = run(&mut single);
    assert_eq!(a, b);
    assert!(a[0].contains("22023"), "the cycle is refused: {}", a[0]);
    assert!(a.iter().any(|s| s == "update: Some(2) then None"), "{a:?}");
    assert!(a.iter().any(|s| s.contains("23503")), "{a:?}");
    assert_eq!(a.last().map(String::as_str), Some("turns: 3"));
}

/// One eval conversation: (turn ids, texts, at, embeddings) and its questions (text, embedding, evidence).
type Eval = (Vec<(String, String, String)>, Vec<Vec<f32>>, Vec<(String, Vec<f32>, Vec<String>)>);

fn eval_conversations() -> Option<Vec<Eval>> {
    let dir = std::env::var("AGENT_MEMORY_EVAL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/eval/conversations"));
    let read = |p: std::path::PathBuf| -> Vec<Vec<f32>> {
        std::fs::read(&p)
            .unwrap()
            .chunks_exact(4 * 384)
            .map(|r| r.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
            .collect()
    };
    let mut out = Vec::new();
    for n in 1.. {
        let json = dir.join(format!("conversation-{n}.json"));
        if !json.exists() {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let turns: Vec<(String, String, String)> = v["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["id"].as_str().unwrap().into(), t["text"].as_str().unwrap().into(), t["at"].as_str().unwrap().into()))
            .collect();
        let embs = read(dir.join(format!("conversation-{n}.turns.f32")));
        let questions = v["questions"]
            .as_array()
            .unwrap()
            .iter()
            .zip(read(dir.join(format!("conversation-{n}.questions.f32"))))
            .map(|(q, e)| {
                let evidence = q["evidence"].as_array().unwrap().iter().filter_map(|x| x.as_str().map(String::from)).collect();
                (q["question"].as_str().unwrap().to_string(), e, evidence)
            })
            .collect();
        out.push((turns, embs, questions));
    }
    (!out.is_empty()).then_some(out)
}

/// Loads every conversation as one user (`eval-<n>`), each turn an episodic memory dated
/// at its time (shifted so that its conversation ends a day before `now`), and packs them.
fn load_eval(c: &mut Client, convs: &[Eval], now: &str) {
    for (n, (turns, embs, _)) in convs.iter().enumerate() {
        let user = format!("eval-{}", n + 1);
        c.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
        let last = turns.iter().map(|t| t.2.as_str()).max().unwrap().to_string();
        for (chunk_t, chunk_e) in turns.chunks(200).zip(embs.chunks(200)) {
            let ids: Vec<&str> = chunk_t.iter().map(|t| t.0.as_str()).collect();
            let texts: Vec<&str> = chunk_t.iter().map(|t| t.1.as_str()).collect();
            let ats: Vec<&str> = chunk_t.iter().map(|t| t.2.as_str()).collect();
            let vs: Vec<Vector> = chunk_e.iter().map(|e| Vector::from(e.clone())).collect();
            c.execute(
                "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at, source)
                 SELECT $1, 'episodic', x.content, x.emb, 'all-MiniLM-L6-v2', t, t, x.id
                   FROM unnest($2::text[], $3::text[], $4::text[], $5::vector[]) AS x(id, content, at, emb),
                        LATERAL (SELECT $6::text::timestamptz - ($7::text::timestamp + interval '1 day' - x.at::timestamp) AS t) s",
                &[&user, &ids, &texts, &ats, &vs, &now, &last],
            )
            .unwrap();
        }
        c.query("SELECT agent_memory.memory_pack($1)", &[&user]).unwrap();
    }
}

/// Mean evidence recall@10 over the questions, vector-only and hybrid.
fn eval_recall(c: &mut Client, convs: &[Eval]) -> (f64, f64) {
    let (mut vector, mut hybrid, mut n) = (0.0, 0.0, 0usize);
    for (i, (_, _, questions)) in convs.iter().enumerate() {
        let user = format!("eval-{}", i + 1);
        for (text, emb, evidence) in questions {
            n += 1;
            if evidence.is_empty() {
                continue;
            }
            let q = Vector::from(emb.clone());
            for (text, sum) in [(None, &mut vector), (Some(text.as_str()), &mut hybrid)] {
                // Through the coordinator a call is delegated when it is the whole query
                // (`SELECT ... FROM memory_recall(...)`); the sources are read next.
                let ids: Vec<i64> = c
                    .query(
                        "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'all-MiniLM-L6-v2', query_text => $3, touch => false)",
                        &[&user, &q, &text],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let got: Vec<String> = c
                    .query("SELECT source FROM agent_memory.memories WHERE user_id = $1 AND id = ANY($2)", &[&user, &ids])
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                *sum += evidence.iter().filter(|e| got.contains(e)).count() as f64 / evidence.len() as f64;
            }
        }
    }
    (vector / n as f64, hybrid / n as f64)
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn the_eval_conversations_through_the_coordinator_are_recalled_as_on_one_server() {
    let Some(convs) = eval_conversations() else {
        println!("skipped: no eval conversations (../shared/eval/conversations, or AGENT_MEMORY_EVAL)");
        return;
    };
    let mut cl = coordinator();
    let mut single = single("am_it_citus_eval");
    let now: String = single.query_one("SELECT now()::text", &[]).unwrap().get(0);
    load_eval(&mut cl, &convs, &now);
    load_eval(&mut single, &convs, &now);
    let users: Vec<String> = (1..=convs.len()).map(|n| format!("eval-{n}")).collect();
    let nodes: std::collections::BTreeSet<u16> = users.iter().map(|u| holder(&mut cl, u)).collect();
    let (cv, ch) = eval_recall(&mut cl, &convs);
    let (sv, sh) = eval_recall(&mut single, &convs);
    println!(
        "evidence recall@10 on {} conversations: vector {cv:.3} on the cluster, {sv:.3} on one server; hybrid {ch:.3} and {sh:.3}",
        convs.len()
    );
    assert!(nodes.len() == 2 || users.len() < 3, "the conversations' users are on both workers: {nodes:?}");
    assert!((cv - sv).abs() < 0.002, "vector recall@10: cluster {cv}, one server {sv}");
    assert!((ch - sh).abs() < 0.002, "hybrid recall@10: cluster {ch}, one server {sh}");
    assert!(ch > 0.5, "hybrid recall@10 {ch} is far below what one server gives");
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn a_call_citus_would_not_send_to_its_users_node_is_refused_before_citus_plans_it() {
    let mut cl = coordinator();
    let q = Vector::from(vec![0.5f32; DIMS]);
    cl.query("SELECT * FROM agent_memory.memory_reconcile('guard-1', NULL, NULL, NULL, 'guard note', $1::vector, model => 'm16')", &[&q])
        .unwrap();
    let code = |c: &mut Client, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]| -> String {
        match c.query(sql, params) {
            Ok(rows) => format!("{} rows", rows.len()),
            Err(e) => e.code().map(|s| s.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}")),
        }
    };
    let none: Option<String> = None;
    // A NULL user: a constant, a parameter, named, and an expression that folds to NULL.
    assert_eq!(code(&mut cl, "SELECT * FROM agent_memory.memory_recall(NULL, '[1]'::vector, 3)", &[]), "22004");
    assert_eq!(code(&mut cl, "SELECT * FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16')", &[&none, &q]), "22004");
    assert_eq!(
        code(&mut cl, "SELECT * FROM agent_memory.memory_recall(query => $1::vector, user_id => NULL, model => 'm16')", &[&q]),
        "22004"
    );
    assert_eq!(code(&mut cl, "SELECT * FROM agent_memory.memory_recall(nullif('a', 'a'), $1::vector, 3, model => 'm16')", &[&q]), "22004");
    assert_eq!(code(&mut cl, "SELECT agent_memory.memory_record_turn(NULL, 's', 'user', 'hi')", &[]), "22004");
    assert_eq!(code(&mut cl, "SELECT * FROM agent_memory.memory_erase(NULL)", &[]), "22004");
    // A user from a column of another relation, from a subquery, in a CTE.
    assert_eq!(
        code(
            &mut cl,
            "SELECT r.id FROM (VALUES ('guard-1')) x(u), LATERAL agent_memory.memory_recall(x.u, $1::vector, 3, model => 'm16') r",
            &[&q]
        ),
        "0F000"
    );
    assert_eq!(
        code(&mut cl, "SELECT * FROM agent_memory.memory_recall((SELECT 'guard-1'), $1::vector, 3, model => 'm16')", &[&q]),
        "0F000"
    );
    assert_eq!(
        code(
            &mut cl,
            "WITH r AS (SELECT * FROM agent_memory.memory_recall('guard-1', $1::vector, 3, model => 'm16')) SELECT count(*) FROM r",
            &[&q]
        ),
        "0F000"
    );
    assert_eq!(
        code(&mut cl, "SELECT (SELECT count(*) FROM agent_memory.memory_recall('guard-1', $1::vector, 3, model => 'm16'))", &[&q]),
        "0F000"
    );
    // The same connection goes on (a crash would have ended every session of the coordinator),
    // and the call made as a statement of its own answers.
    assert_eq!(code(&mut cl, "SELECT * FROM agent_memory.memory_recall('guard-1', $1::vector, 3, model => 'm16')", &[&q]), "1 rows");
    // On one server the same calls answer (only a NULL user is refused).
    let mut one = single("am_it_citus_guard");
    one.query("SELECT * FROM agent_memory.memory_reconcile('guard-1', NULL, NULL, NULL, 'guard note', $1::vector, model => 'm16')", &[&q])
        .unwrap();
    assert_eq!(
        code(
            &mut one,
            "SELECT r.id FROM (VALUES ('guard-1')) x(u), LATERAL agent_memory.memory_recall(x.u, $1::vector, 3, model => 'm16') r",
            &[&q]
        ),
        "1 rows"
    );
    assert_eq!(code(&mut one, "SELECT * FROM agent_memory.memory_recall(NULL, $1::vector, 3, model => 'm16')", &[&q]), "22004");
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn a_tenant_role_binding_its_user_with_set_local_sees_its_user_and_nothing_else() {
    let mut cl = coordinator();
    // Each its own transaction: the access calls are made on the workers as they run, where a
    // role is known once its creation committed.
    cl.batch_execute(
        "DO $$ BEGIN
             IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'citus_tenant') THEN CREATE ROLE citus_tenant LOGIN; END IF;
         END $$",
    )
    .unwrap();
    cl.batch_execute("SELECT agent_memory.grant_access('citus_tenant', 'writer')").unwrap();
    cl.batch_execute("SELECT agent_memory.bind_role('citus_tenant', 'acme:%')").unwrap();
    let q = Vector::from(vec![0.5f32; DIMS]);
    for user in ["acme:ann", "acme:bob", "beta:cy"] {
        cl.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
        cl.query(
            "SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector, model => 'm16')",
            &[&user, &format!("a note of {user}"), &q],
        )
        .unwrap();
    }
    let (host, port, db) = cluster_env();
    let mut t = Client::connect(&format!("host={host} port={port} user=citus_tenant dbname={db}"), NoTls).unwrap();
    let recall_as = |t: &mut Client, bound: &str, asked: &str| -> Result<Vec<String>, String> {
        let mut tx = t.transaction().unwrap();
        tx.batch_execute(&format!("SET LOCAL agent_memory.user_id = {}", quote(bound))).unwrap();
        let r = tx
            .query("SELECT content FROM agent_memory.memory_recall($1, $2::vector, 5, model => 'm16')", &[&asked, &q])
            .map(|rows| rows.iter().map(|r| r.get(0)).collect())
            .map_err(|e| e.code().map(|s| s.code().to_string()).unwrap_or_default());
        let rows: Vec<String> = tx
            .query("SELECT content FROM agent_memory.memories ORDER BY 1", &[])
            .map(|rows| rows.iter().map(|r| r.get(0)).collect())
            .unwrap_or_default();
        tx.rollback().unwrap();
        r.map(|mut v: Vec<String>| {
            v.push(format!("table: {rows:?}"));
            v
        })
    };
    assert_eq!(recall_as(&mut t, "acme:ann", "acme:ann"), Ok(vec!["a note of acme:ann".into(), "table: [\"a note of acme:ann\"]".into()]));
    assert_eq!(recall_as(&mut t, "acme:bob", "acme:bob"), Ok(vec!["a note of acme:bob".into(), "table: [\"a note of acme:bob\"]".into()]));
    // Another user than its session's, a user outside its binding: nothing of theirs, in the
    // call or in the table.
    assert_eq!(recall_as(&mut t, "acme:ann", "acme:bob"), Ok(vec!["table: [\"a note of acme:ann\"]".into()]));
    assert_eq!(recall_as(&mut t, "beta:cy", "beta:cy"), Ok(vec!["table: []".into()]));
    // One server answers the same to the same role.
    let mut one = single("am_it_citus_tenancy");
    one.batch_execute(
        "DO $$ BEGIN
             IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'citus_tenant') THEN CREATE ROLE citus_tenant LOGIN; END IF;
         END $$;
         SELECT agent_memory.grant_access('citus_tenant', 'writer');
         SELECT agent_memory.bind_role('citus_tenant', 'acme:%')",
    )
    .unwrap();
    for user in ["acme:ann", "acme:bob", "beta:cy"] {
        one.query(
            "SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector, model => 'm16')",
            &[&user, &format!("a note of {user}"), &q],
        )
        .unwrap();
    }
    let (single_host, single_port) = agent_memory_tests::host_port();
    let mut t1 =
        Client::connect(&format!("host={single_host} port={single_port} user=citus_tenant dbname=am_it_citus_tenancy"), NoTls).unwrap();
    for (bound, asked) in [("acme:ann", "acme:ann"), ("acme:bob", "acme:bob"), ("acme:ann", "acme:bob"), ("beta:cy", "beta:cy")] {
        assert_eq!(recall_as(&mut t, bound, asked), recall_as(&mut t1, bound, asked), "{bound} asking for {asked}");
    }
    drop(t1);
    one.batch_execute("SELECT agent_memory.revoke_access('citus_tenant')").unwrap();
    // Without SET LOCAL: no user, nothing seen.
    let none: Vec<String> = t.query("SELECT content FROM agent_memory.memories", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert!(none.is_empty(), "{none:?}");
    cl.batch_execute("SELECT agent_memory.unbind_role('citus_tenant')").unwrap();
    for w in [1u16, 2] {
        let n: i64 =
            node(w).query_one("SELECT count(*) FROM agent_memory.role_users WHERE role_name = 'citus_tenant'", &[]).unwrap().get(0);
        assert_eq!(n, 0, "the unbinding reached worker {w}");
    }
    // Access given to a role created in the same transaction cannot reach the workers before it
    // commits: refused after a lock timeout, clearly, instead of waiting for ever.
    let mut tx = cl.transaction().unwrap();
    tx.batch_execute("CREATE ROLE citus_uncommitted").unwrap();
    let err = tx.query("SELECT agent_memory.grant_access('citus_uncommitted', 'reader')", &[]).unwrap_err();
    let db = err.as_db_error().unwrap_or_else(|| panic!("{err}"));
    assert_eq!(db.code().code(), "55000", "{}", db.message());
    assert!(db.hint().is_some_and(|h| h.contains("commit it first")), "{:?}", db.hint());
    tx.rollback().unwrap();
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn a_user_above_the_exact_limit_is_ranked_through_the_index_as_on_one_server() {
    let mut cl = coordinator();
    let mut one = single("am_it_citus_large");
    let user = "large-001";
    let mut rng = Rng(77);
    let batches: Vec<String> = (0..3)
        .map(|b| {
            let facts: Vec<serde_json::Value> =
                (0..100).map(|i| serde_json::json!({"content": format!("large note {b}-{i}"), "emb": rng.vector(DIMS)})).collect();
            serde_json::Value::from(facts).to_string()
        })
        .collect();
    cl.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
    for c in [&mut cl, &mut one] {
        for b in &batches {
            c.query("SELECT * FROM agent_memory.memory_reconcile_batch($1, $2::text::jsonb, 'm16')", &[&user, b]).unwrap();
        }
        c.query("SELECT agent_memory.memory_create_index('m16')", &[]).unwrap();
    }
    let ranked = |c: &mut Client, q: &Vector| -> Vec<(String, i64, String)> {
        let mut tx = c.transaction().unwrap();
        // Set in the transaction: SET LOCAL reaches the worker that runs the call.
        tx.batch_execute("SET LOCAL agent_memory.exact_limit = 100").unwrap();
        let rows = tx
            .query(
                "SELECT content, similarity, path FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'm16', touch => false)",
                &[&user, q],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), (r.get::<_, f64>(1) * 1e6).round() as i64, r.get(2)))
            .collect();
        tx.rollback().unwrap();
        rows
    };
    for _ in 0..5 {
        let q = emb(&mut rng);
        let a = ranked(&mut cl, &q);
        assert_eq!(a.len(), 10);
        assert!(a.iter().all(|r| r.2 == "approximate"), "the cluster ranked {user} through the index: {a:?}");
        assert_eq!(a, ranked(&mut one, &q), "the index's ranking of {user}");
    }
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn evidence_by_id_and_a_model_registered_inside_a_call_answer_as_on_one_server() {
    let mut cl = coordinator();
    let mut one = single("am_it_citus_evidence");
    let user = "ev-001";
    let run = |c: &mut Client| -> Vec<String> {
        // Each on an axis of its own: no two are near-duplicates.
        let e = |axis: usize| Vector::from((0..DIMS).map(|i| if i == axis { 1.0 } else { 0.0 }).collect::<Vec<f32>>());
        let id = |c: &mut Client, content: &str, axis: usize| -> i64 {
            c.query_one(
                "SELECT memory_id FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector, model => 'm16')",
                &[&user, &content, &e(axis)],
            )
            .unwrap()
            .get(0)
        };
        let (a, b, s) = (id(c, "Walked 5 km on Monday", 1), id(c, "Walked 7 km on Tuesday", 2), id(c, "Walks most days", 3));
        // A summary by hand: the evidence retired as summarized, pointing at it.
        c.execute(
            "UPDATE agent_memory.memories SET active = false, retired_reason = 'summarized', retired_at = now(),
                    superseded_by = $2, version = version + 1
              WHERE user_id = $1 AND id = ANY($3)",
            &[&user, &s, &vec![a, b]],
        )
        .unwrap();
        let mut out: Vec<String> =
            c.query("SELECT content FROM agent_memory.memory_evidence($1)", &[&s]).unwrap().iter().map(|r| r.get(0)).collect();
        // A model written for the first time inside a transaction block: one server registers
        // it; a Citus worker cannot write the registry from there, and says to register it
        // through the coordinator first.
        let mut tx = c.transaction().unwrap();
        let r = tx.query(
            "SELECT action FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, 'a note of a new model', '[1,0,0,0,0]'::vector, model => 'm5')",
            &[&user],
        );
        out.push(match r {
            Ok(rows) => format!("new model: {}", rows[0].get::<_, String>(0)),
            Err(e) => {
                let db = e.as_db_error().unwrap();
                format!("new model: {} {}", db.code().code(), db.hint().unwrap_or(""))
            }
        });
        tx.rollback().unwrap();
        out
    };
    cl.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[&user]).unwrap();
    let a = run(&mut cl);
    let b = run(&mut one);
    assert_eq!(a[..2], b[..2], "memory_evidence through the coordinator");
    assert_eq!(a[..2], ["Walked 5 km on Monday".to_string(), "Walked 7 km on Tuesday".to_string()]);
    assert_eq!(b[2], "new model: ADD");
    assert!(a[2].starts_with("new model: 55000") && a[2].contains("register_model('m5', 5)"), "{}", a[2]);
    // Registered through the coordinator, the same write goes through in a transaction block.
    cl.query("SELECT agent_memory.register_model('m5', 5)", &[]).unwrap();
    let mut tx = cl.transaction().unwrap();
    let action: String = tx
        .query_one(
            "SELECT action FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, 'a note of a new model', '[1,0,0,0,0]'::vector, model => 'm5')",
            &[&user],
        )
        .unwrap()
        .get(0);
    tx.commit().unwrap();
    assert_eq!(action, "ADD");
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn forgetting_called_on_the_coordinator_runs_on_every_worker_over_its_own_shards() {
    let mut cl = coordinator();
    let users: Vec<String> = (0..30).map(|u| format!("maint-{u:03}")).collect();
    let mut rng = Rng(31);
    for user in &users {
        cl.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[user]).unwrap();
        let facts: Vec<serde_json::Value> =
            (0..4).map(|i| serde_json::json!({"content": format!("maintenance note {i} of {user}"), "emb": rng.vector(DIMS)})).collect();
        cl.query(
            "SELECT * FROM agent_memory.memory_reconcile_batch($1, $2::text::jsonb, 'm16')",
            &[user, &serde_json::Value::from(facts).to_string()],
        )
        .unwrap();
    }
    // Two memories of each user expired an hour ago.
    let expired = cl
        .execute(
            "UPDATE agent_memory.memories SET expires_at = now() - interval '1 hour'
              WHERE user_id LIKE 'maint-%' AND content ~ 'note [01] '",
            &[],
        )
        .unwrap();
    assert_eq!(expired, 60);
    let holders: std::collections::BTreeSet<u16> = users.iter().map(|u| holder(&mut cl, u)).collect();
    assert_eq!(holders.len(), 2, "the users are on both workers");
    let runs_before =
        |n: u16| -> i64 { node(n).query_one("SELECT count(*) FROM agent_memory.runs WHERE job = 'forget'", &[]).unwrap().get(0) };
    let before = [runs_before(1), runs_before(2)];
    // A dry run says what would go, on every worker, and changes nothing.
    let dry: i64 = cl
        .query("SELECT step, rows FROM agent_memory.memory_forget(dry_run => true)", &[])
        .unwrap()
        .iter()
        .filter(|r| r.get::<_, String>(0) == "expire")
        .map(|r| r.get::<_, i64>(1))
        .sum();
    assert!(dry >= 60, "a dry run through the coordinator counts the expired memories of both workers: {dry}");
    let still: i64 =
        cl.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id LIKE 'maint-%' AND active", &[]).unwrap().get(0);
    assert_eq!(still, 120);
    let steps: Vec<(String, i64)> =
        cl.query("SELECT step, rows FROM agent_memory.memory_forget()", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
    let expire: i64 = steps.iter().filter(|(s, _)| s == "expire").map(|(_, n)| n).sum();
    assert!(expire >= 60, "the expire step on both workers: {steps:?}");
    // Every expired memory of every user is retired, once, on the node that holds it; the
    // others are untouched.
    for user in &users {
        let (active, retired): (i64, i64) = {
            let r = cl
                .query_one(
                    "SELECT count(*) FILTER (WHERE active), count(*) FILTER (WHERE NOT active AND retired_reason = 'expired')
                       FROM agent_memory.memories WHERE user_id = $1",
                    &[user],
                )
                .unwrap();
            (r.get(0), r.get(1))
        };
        assert_eq!((active, retired), (2, 2), "{user}");
    }
    // Each worker recorded its own run; the coordinator holds no shard and forgot nothing itself.
    assert_eq!(runs_before(1), before[0] + 1);
    assert_eq!(runs_before(2), before[1] + 1);
    // The coordinator shows every node's runs: the run of each worker, with its steps.
    let (_, base, _) = cluster_env();
    let seen: Vec<(String, i64)> = cl
        .query(
            "SELECT node, (steps->>'expire')::bigint FROM agent_memory.cluster_runs()
              WHERE job = 'forget' AND id = (SELECT max(r.id) FROM agent_memory.cluster_runs() r WHERE r.node = cluster_runs.node AND r.job = 'forget')
              ORDER BY node",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get::<_, Option<i64>>(1).unwrap_or(0)))
        .collect();
    let workers: Vec<String> = seen
        .iter()
        .map(|(n, _)| n.clone())
        .filter(|n| n.ends_with(&format!(":{}", base + 1)) || n.ends_with(&format!(":{}", base + 2)))
        .collect();
    assert_eq!(workers.len(), 2, "{seen:?}");
    assert!(seen.iter().map(|(_, n)| n).sum::<i64>() >= 60, "{seen:?}");
    // Called on a worker, the pass runs over that worker's shards only.
    let on_worker: Vec<(String, i64)> =
        node(1).query("SELECT step, rows FROM agent_memory.memory_forget()", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
    assert!(on_worker.iter().any(|(s, _)| s == "expire"), "{on_worker:?}");
    // Consolidation too runs through the coordinator on every worker.
    cl.query("SELECT * FROM agent_memory.memory_consolidate()", &[]).unwrap();
}

/// What a workload came to: acknowledged writes per user, failed calls, calls, the first
/// distinct errors.
type Outcome = (BTreeMap<String, i64>, usize, usize, Vec<String>);

/// A workload through the coordinator on `users` until `stop`: each round writes one memory of
/// each user and recalls it.
fn workload(users: Vec<String>, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<Outcome> {
    std::thread::spawn(move || {
        let mut acked: BTreeMap<String, i64> = users.iter().map(|u| (u.clone(), 0)).collect();
        let (mut failed, mut calls) = (0, 0);
        let mut errors: Vec<String> = Vec::new();
        let mut note = |e: String| {
            if errors.len() < 5 && !errors.contains(&e) {
                errors.push(e);
            }
        };
        let connect = || {
            let (host, port, db) = cluster_env();
            Client::connect(&format!("host={host} port={port} user=postgres dbname={db}"), NoTls).ok()
        };
        let mut c: Option<Client> = connect();
        let mut rng = Rng(77);
        let mut round = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            round += 1;
            for u in &users {
                let Some(cl) = c.as_mut() else {
                    c = connect();
                    failed += 1;
                    note("connecting to the coordinator failed".into());
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    continue;
                };
                calls += 2;
                // Each on an axis of its own and far from the rest: a new memory each round.
                let e = emb(&mut rng);
                match cl.query(
                    "SELECT * FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector, model => 'm16')",
                    &[u, &format!("round {round} of {u}"), &e],
                ) {
                    Ok(rows) => *acked.get_mut(u).unwrap() += rows.iter().filter(|r| r.get::<_, String>(0) == "ADD").count() as i64,
                    Err(e) => {
                        failed += 1;
                        note(format!(
                            "reconcile: {} {}",
                            e.code().map(|s| s.code()).unwrap_or("-"),
                            e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string())
                        ));
                    }
                }
                match cl.query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16', touch => false)", &[u, &e]) {
                    Ok(rows) if !rows.is_empty() => {}
                    Ok(_) => {
                        failed += 1;
                        note(format!("recall of {u} in round {round} found nothing"));
                    }
                    Err(e) => {
                        failed += 1;
                        note(format!(
                            "recall: {} {}",
                            e.code().map(|s| s.code()).unwrap_or("-"),
                            e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string())
                        ));
                    }
                }
                if cl.is_closed() {
                    c = None;
                }
            }
        }
        (acked, failed, calls, errors)
    })
}

/// Per user: (rows, a hash of every row's id, version, content and activity), read through the
/// coordinator.
fn fingerprint(c: &mut Client, users: &[String]) -> BTreeMap<String, (i64, String)> {
    users
        .iter()
        .map(|u| {
            let r = c
                .query_one(
                    "SELECT count(*), coalesce(md5(string_agg(id || ':' || version || ':' || content || ':' || active, ',' ORDER BY id)), '')
                       FROM agent_memory.memories WHERE user_id = $1",
                    &[u],
                )
                .unwrap();
            (u.clone(), (r.get(0), r.get(1)))
        })
        .collect()
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn a_shard_moved_in_the_middle_of_a_workload_loses_nothing_and_recall_keeps_answering() {
    let mut cl = coordinator();
    let users: Vec<String> = (0..8).map(|i| format!("mover-{i}")).collect();
    for u in &users {
        cl.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[u]).unwrap();
    }
    let moved = users[0].clone();
    let (from, shard): (u16, i64) = (
        holder(&mut cl, &moved),
        cl.query_one("SELECT get_shard_id_for_distribution_column('agent_memory.memories', $1::text)", &[&moved]).unwrap().get(0),
    );
    let to = 3 - from;
    let (_, base, _) = cluster_env();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let work = workload(users.clone(), stop.clone());
    std::thread::sleep(std::time::Duration::from_secs(2));
    // The shard and its colocated shards (turns, packs, tasks, ...) go to the other worker, by
    // logical replication while the writes go on (the default mode).
    // Moved there, back, and there again: each switch is a moment a write could be lost.
    for (a, b) in [(from, to), (to, from), (from, to)] {
        cl.execute(
            "SELECT citus_move_shard_placement($1, 'localhost', $2, 'localhost', $3)",
            &[&shard, &(base as i32 + a as i32), &(base as i32 + b as i32)],
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acked, failed, calls, errors) = work.join().unwrap();
    println!("shard move: {calls} calls, {failed} failed {errors:?}, writes acknowledged {acked:?}");
    assert_eq!(holder(&mut cl, &moved), to, "the shard of {moved} moved to worker {to}");
    // A call at the switch may be refused with 0F000 (retry); nothing else fails.
    assert!(errors.iter().all(|e| e.contains("0F000")), "{errors:?}");
    assert!(failed * 20 <= calls, "{failed} of {calls} calls failed: {errors:?}");
    let after = fingerprint(&mut cl, &users);
    for (u, n) in &acked {
        assert!(*n > 0);
        assert_eq!(after[u].0, *n, "every acknowledged write of {u} is kept");
    }
    // Recall of the moved user answers from its new node; the old node refuses a call made there
    // instead of reading the shard's table it keeps until Citus drops it.
    let got = cl
        .query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 5, model => 'm16', touch => false)", &[&moved, &emb(&mut Rng(3))])
        .unwrap();
    assert_eq!(got.len(), 5);
    let err = node(from)
        .query(
            "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16') r WHERE r.id > 0",
            &[&moved, &emb(&mut Rng(4))],
        )
        .unwrap_err();
    assert_eq!(err.code().map(|s| s.code()), Some("0F000"), "{err}");
    // The old node's passes no longer touch the moved shards; the new node's do.
    let sets = |n: u16| -> i64 {
        node(n)
            .query_one(
                "SELECT count(*) FROM pg_dist_placement p WHERE p.shardid = $1
                    AND p.groupid = (SELECT groupid FROM pg_dist_local_group)",
                &[&shard],
            )
            .unwrap()
            .get(0)
    };
    assert_eq!((sets(from), sets(to)), (0, 1));
    node(from).query("SELECT * FROM agent_memory.memory_forget()", &[]).unwrap();
    assert_eq!(fingerprint(&mut cl, &users), after, "a pass on the old node changed nothing of the moved users");
}

#[test]
#[ignore = "needs the Citus cluster of tests/citus.sh"]
fn a_worker_restarted_in_the_middle_of_a_workload_loses_no_acknowledged_memory() {
    let restart =
        std::env::var("AGENT_MEMORY_CITUS_RESTART").expect("AGENT_MEMORY_CITUS_RESTART is not set: run these tests through tests/citus.sh");
    let mut cl = coordinator();
    let users: Vec<String> = (0..8).map(|i| format!("restart-{i}")).collect();
    for u in &users {
        cl.execute("SELECT count(*) FROM agent_memory.memory_erase($1)", &[u]).unwrap();
    }
    let on_2 = users.iter().filter(|u| holder(&mut cl, u) == 2).count();
    assert!(on_2 > 0 && on_2 < users.len(), "the users are on both workers");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let work = workload(users.clone(), stop.clone());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let status = std::process::Command::new("bash").args(["-c", &format!("{restart} 2")]).status().unwrap();
    assert!(status.success(), "restarting worker 2");
    std::thread::sleep(std::time::Duration::from_secs(2));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acked, failed, calls, errors) = work.join().unwrap();
    println!("worker restart: {calls} calls, {failed} failed while worker 2 was down {errors:?}, writes acknowledged {acked:?}");
    let after = fingerprint(&mut cl, &users);
    for (u, n) in &acked {
        // A write whose answer was lost with the connection may have committed: never fewer.
        assert!(after[u].0 >= *n && *n > 0, "{u}: {} rows, {n} acknowledged", after[u].0);
        let got = cl
            .query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 3, model => 'm16', touch => false)", &[u, &emb(&mut Rng(5))])
            .unwrap();
        assert_eq!(got.len(), 3, "recall of {u} answers after the restart");
    }
    // The rows are the same when read again (nothing half-written surfaces later).
    assert_eq!(fingerprint(&mut cl, &users), after);
}
