//! Tenancy against the real server, as applications connect: two application roles granted
//! `writer`, each working for its own user (`SET LOCAL agent_memory.user_id` per transaction, as
//! a pooled service does), 1,000 mixed calls each; neither ever sees, changes or reveals the
//! other user's rows. And an erasure under concurrent writes of the erased user leaves none of
//! the rows written before it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use agent_memory_tests::{connect, fresh_db, Rng};
use pgvector::Vector;
use postgres::Client;

const DB: &str = "agent_memory_tenancy";

fn role_client(role: &str) -> Client {
    Client::connect(&agent_memory_tests::params_as(role, DB), postgres::NoTls).unwrap()
}

fn setup_roles(c: &mut Client) {
    c.batch_execute(
        "DO $$ BEGIN
             IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_app_a') THEN CREATE ROLE am_app_a LOGIN; END IF;
             IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'am_app_b') THEN CREATE ROLE am_app_b LOGIN; END IF;
         END $$;
         SELECT agent_memory.grant_access('am_app_a', 'writer');
         SELECT agent_memory.grant_access('am_app_b', 'writer');",
    )
    .unwrap();
}

/// 1,000 calls of one application for its user; returns every memory id it was ever given.
fn mixed_calls(role: &'static str, user: &'static str, other: &'static str, seed: u64) -> Vec<i64> {
    let mut c = role_client(role);
    let mut rng = Rng(seed);
    let mut seen = Vec::new();
    let mut own: Vec<(i64, i32)> = Vec::new();
    for i in 0..1000 {
        let mut t = c.transaction().unwrap();
        t.execute("SELECT set_config('agent_memory.user_id', $1, true)", &[&user]).unwrap();
        let q = Vector::from(rng.vector(8));
        match i % 8 {
            0 | 1 => {
                let row = t
                    .query_one(
                        "SELECT memory_id FROM agent_memory.memory_reconcile($1, NULL, NULL, NULL, $2, $3::vector)",
                        &[&user, &format!("{user} note {i}"), &q],
                    )
                    .unwrap();
                if let Some(id) = row.get::<_, Option<i64>>(0) {
                    seen.push(id);
                }
            }
            2 => {
                t.query_one("SELECT agent_memory.memory_record_turn($1, 's', 'user', $2)", &[&user, &format!("{user} says {i}")]).unwrap();
            }
            3 => {
                for r in t.query("SELECT id, user_id FROM agent_memory.memories", &[]).unwrap() {
                    assert_eq!(r.get::<_, String>(1), user, "a plain SELECT returned another user's row");
                    let id: i64 = r.get(0);
                    let version: i32 = t.query_one("SELECT version FROM agent_memory.memories WHERE id = $1", &[&id]).unwrap().get(0);
                    own.push((id, version));
                }
            }
            4 => {
                // Asking for the other user: nothing comes back.
                let n =
                    t.query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, touch => false)", &[&other, &q]).unwrap().len();
                assert_eq!(n, 0, "{role} recalled {other}'s memories");
                let n = t.query("SELECT position FROM agent_memory.memory_context($1, 's', $2::vector)", &[&other, &q]).unwrap().len();
                assert_eq!(n, 0, "{role} got {other}'s context");
                // Nor as of a moment, or in a window of time (their own read of the versions).
                let n = t
                    .query(
                        "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, query_text => 'note', as_of => now(),
                                                                   since => now() - interval '1 day')",
                        &[&other, &q],
                    )
                    .unwrap()
                    .len();
                assert_eq!(n, 0, "{role} recalled {other}'s memories as of now");
            }
            5 => {
                for r in t.query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10)", &[&user, &q]).unwrap() {
                    seen.push(r.get(0));
                }
                // Hybrid: the neighbours of its hits are the user's too (both users write at once).
                for r in t
                    .query(
                        "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 10, touch => false, query_text => 'note')",
                        &[&user, &q],
                    )
                    .unwrap()
                {
                    seen.push(r.get(0));
                }
            }
            6 => {
                // Updating an id that is not the user's behaves as a missing memory.
                let guess = (rng.next_u64() % 5000) as i64 + 1;
                let sp = t.savepoint("u").unwrap();
                let mut sp = sp;
                match sp.query_one("SELECT agent_memory.memory_update($1, 1, content => 'changed')", &[&guess]) {
                    Ok(_) => assert!(
                        own.iter().any(|(id, _)| *id == guess) || seen.contains(&guess),
                        "{role} updated memory {guess} it never saw"
                    ),
                    Err(e) => assert!(matches!(e.code().map(|s| s.code()), Some("P0002") | Some("55000")), "{e}"),
                }
                sp.rollback().unwrap();
            }
            _ => {
                let n = t.execute("UPDATE agent_memory.memories SET content = 'x' WHERE user_id = $1", &[&other]).unwrap();
                assert_eq!(n, 0, "{role} changed {other}'s rows");
                let n = t.query("SELECT 1 FROM agent_memory.turns WHERE user_id = $1", &[&other]).unwrap().len();
                assert_eq!(n, 0);
            }
        }
        t.commit().unwrap();
    }
    seen
}

#[test]
fn two_applications_never_see_each_others_users() {
    let mut c = fresh_db(DB);
    setup_roles(&mut c);
    // Both users have memories before the applications start.
    for user in ["tenant-a", "tenant-b"] {
        for i in 0..20 {
            c.execute(
                "INSERT INTO agent_memory.memories (user_id, content, emb) VALUES ($1, $2, $3)",
                &[&user, &format!("seed {i} of {user}"), &Vector::from(Rng(i as u64 + 7).vector(8))],
            )
            .unwrap();
        }
    }
    let a = thread::spawn(|| mixed_calls("am_app_a", "tenant-a", "tenant-b", 1));
    let b = thread::spawn(|| mixed_calls("am_app_b", "tenant-b", "tenant-a", 2));
    let (seen_a, seen_b) = (a.join().unwrap(), b.join().unwrap());
    let owner = |ids: &Vec<i64>| -> Vec<String> {
        let mut c = connect(DB);
        c.query("SELECT DISTINCT user_id FROM agent_memory.memories WHERE id = ANY ($1)", &[ids])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    assert_eq!(owner(&seen_a), vec!["tenant-a".to_string()]);
    assert_eq!(owner(&seen_b), vec!["tenant-b".to_string()]);
    let unchanged: i64 = c
        .query_one("SELECT count(*) FROM agent_memory.memories WHERE content = 'x' OR content = 'changed' AND user_id <> 'tenant-a' AND user_id <> 'tenant-b'", &[])
        .unwrap()
        .get(0);
    assert_eq!(unchanged, 0);
    c.batch_execute("SELECT agent_memory.revoke_access('am_app_a'), agent_memory.revoke_access('am_app_b')").unwrap();
}

#[test]
fn an_erasure_under_concurrent_writes_leaves_nothing_written_before_it() {
    let mut c = fresh_db("agent_memory_erase_race");
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut c = connect("agent_memory_erase_race");
                let mut rng = Rng(w + 50);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let q = Vector::from(rng.vector(8));
                    c.query(
                        "SELECT * FROM agent_memory.memory_reconcile('erased', NULL, NULL, NULL, $1, $2::vector)",
                        &[&format!("w{w} {n}"), &q],
                    )
                    .unwrap();
                    c.query_one("SELECT agent_memory.memory_record_turn('erased', 's', 'user', $1)", &[&format!("w{w} turn {n}")]).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Every row committed before the erasure starts must be gone after it.
    let before = c
        .query_one(
            "SELECT (SELECT max(id) FROM agent_memory.memories WHERE user_id = 'erased'), \
                    (SELECT max(id) FROM agent_memory.turns WHERE user_id = 'erased')",
            &[],
        )
        .unwrap();
    let (max_memory, max_turn): (Option<i64>, Option<i64>) = (before.get(0), before.get(1));
    let receipt = c.query_one("SELECT memories, turns FROM agent_memory.memory_erase('erased')", &[]).unwrap();
    let (erased_memories, erased_turns): (i64, i64) = (receipt.get(0), receipt.get(1));
    stop.store(true, Ordering::Relaxed);
    let written: i64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(max_memory.is_some() && max_turn.is_some() && written > 0, "the writers had written before the erasure");
    assert!(erased_memories > 0 && erased_turns > 0);
    let left_before: i64 = c
        .query_one(
            "SELECT (SELECT count(*) FROM agent_memory.memories WHERE user_id = 'erased' AND id <= $1) + \
                    (SELECT count(*) FROM agent_memory.turns WHERE user_id = 'erased' AND id <= $2)",
            &[&max_memory.unwrap(), &max_turn.unwrap()],
        )
        .unwrap()
        .get(0);
    assert_eq!(left_before, 0, "rows written before the erasure survived it");
    let receipts: i64 = c.query_one("SELECT count(*) FROM agent_memory.erasures", &[]).unwrap().get(0);
    assert_eq!(receipts, 1);
}
