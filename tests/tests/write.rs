//! The write path over real connections and under real concurrency: conditional updates that
//! never lose a write, and reconciliations of one fact key that leave exactly one active row.

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::thread;

use agent_memory_tests::{at_once, connect, fresh_db, Rng};
use pgvector::Vector;

#[test]
fn eight_writers_at_one_version_exactly_one_wins_every_time() {
    let db = "am_it_update_race";
    let mut c = fresh_db(db);
    let id: i64 = c
        .query_one(
            "SELECT memory_id FROM agent_memory.memory_reconcile('racer', 'user', 'mood', 'calm', 'Is calm', '[1,0,0]'::vector)",
            &[],
        )
        .unwrap()
        .get(0);
    let threads = 8;
    let rounds = 100;
    let start = Arc::new(Barrier::new(threads));
    let read = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (start, read) = (start.clone(), read.clone());
            thread::spawn(move || {
                let mut c = connect(db);
                let mut wins = Vec::new();
                for round in 0..rounds {
                    start.wait();
                    let v: i32 = c.query_one("SELECT version FROM agent_memory.memories WHERE id = $1", &[&id]).unwrap().get(0);
                    // Everybody has read the same version before anybody writes.
                    read.wait();
                    let importance = ((t * 7 + round) % 10) as f32 / 10.0 + 0.05;
                    let new: Option<i32> = c
                        .query_one(
                            "SELECT agent_memory.memory_update($1, $2, content => $3, importance => $4)",
                            &[&id, &v, &format!("writer {t} round {round}"), &importance],
                        )
                        .unwrap()
                        .get(0);
                    if let Some(n) = new {
                        assert_eq!(n, v + 1, "a win moves the version by one");
                        wins.push(round);
                    }
                }
                wins
            })
        })
        .collect();
    let mut wins_per_round: HashMap<usize, usize> = HashMap::new();
    for h in handles {
        for round in h.join().unwrap() {
            *wins_per_round.entry(round).or_default() += 1;
        }
    }
    for round in 0..rounds {
        assert_eq!(wins_per_round.get(&round).copied().unwrap_or(0), 1, "round {round}: exactly one writer wins, 7 see the conflict");
    }
    let total_wins: usize = wins_per_round.values().sum();
    let (version, content): (i32, String) = {
        let r = c.query_one("SELECT version, content FROM agent_memory.memories WHERE id = $1", &[&id]).unwrap();
        (r.get(0), r.get(1))
    };
    // No lost update: every win is one version, and the last win's content is what is stored.
    assert_eq!(version as usize, 1 + total_wins);
    assert!(content.ends_with(&format!("round {}", rounds - 1)), "{content}");
}

#[test]
fn sixteen_reconciles_of_one_key_leave_one_active_row_and_one_chain() {
    let db = "am_it_reconcile_race";
    let mut c = fresh_db(db);
    // Register the model first, so every writer meets the same dimension.
    c.batch_execute("SELECT * FROM agent_memory.memory_reconcile('someone-else', NULL, NULL, NULL, 'seed', '[1,0,0,0,0,0,0,0]'::vector)")
        .unwrap();
    let writers = 16;
    let results: Vec<(String, i64, Option<i64>)> = at_once(db, writers, |w, c| {
        let emb = Vector::from(Rng(w as u64 + 1).vector(8));
        let row = c
            .query_one(
                "SELECT action, memory_id, previous_id FROM agent_memory.memory_reconcile(\
                   'contended', 'user', 'favourite_colour', $1, $2, $3::vector)",
                &[&format!("colour-{w}"), &format!("Favourite colour is colour-{w}"), &emb],
            )
            .unwrap();
        (row.get::<_, String>(0), row.get::<_, i64>(1), row.get::<_, Option<i64>>(2))
    });
    assert_eq!(results.iter().filter(|r| r.0 == "ADD").count(), 1, "{results:?}");
    assert_eq!(results.iter().filter(|r| r.0 == "UPDATE").count(), writers - 1, "{results:?}");

    let rows = c
        .query(
            "SELECT id, active, superseded_by FROM agent_memory.memories \
              WHERE user_id = 'contended' AND subject = 'user' AND predicate = 'favourite_colour' ORDER BY id",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), writers);
    let active: Vec<i64> = rows.iter().filter(|r| r.get::<_, bool>(1)).map(|r| r.get(0)).collect();
    assert_eq!(active.len(), 1, "exactly one active row for the key");
    // Walk the chain from the row nobody supersedes-into (the first ADD) to the active row.
    let next: HashMap<i64, Option<i64>> = rows.iter().map(|r| (r.get(0), r.get(2))).collect();
    let pointed_to: Vec<i64> = next.values().flatten().copied().collect();
    let heads: Vec<i64> = next.keys().copied().filter(|id| !pointed_to.contains(id)).collect();
    assert_eq!(heads.len(), 1, "one chain has one head: {next:?}");
    let mut seen = vec![heads[0]];
    let mut at = heads[0];
    while let Some(Some(n)) = next.get(&at) {
        at = *n;
        seen.push(at);
        assert!(seen.len() <= writers, "the chain loops");
    }
    assert_eq!(seen.len(), writers, "the chain covers every row");
    assert_eq!(at, active[0], "the chain ends at the active row");
    // Each UPDATE reported the row it superseded, consistently with the chain.
    for (action, id, previous) in &results {
        if action == "UPDATE" {
            assert_eq!(next.get(&previous.unwrap()).copied().flatten(), Some(*id));
        }
    }
}

#[test]
fn a_batch_over_the_wire_returns_one_row_per_fact_in_order() {
    let mut c = fresh_db("am_it_batch");
    let mut rng = Rng(42);
    let facts: Vec<serde_json::Value> = (0..200)
        .map(|i| {
            serde_json::json!({
                "subject": "user",
                "predicate": format!("p{}", i % 50),
                "object": format!("o{i}"),
                "content": format!("fact {i}"),
                "emb": rng.vector(16),
            })
        })
        .collect();
    let json = serde_json::Value::Array(facts).to_string();
    let rows = c.query("SELECT ordinal, action FROM agent_memory.memory_reconcile_batch('batcher', $1::text::jsonb)", &[&json]).unwrap();
    assert_eq!(rows.len(), 200);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.get::<_, i32>(0) as usize, i + 1);
        let want = if i < 50 { "ADD" } else { "UPDATE" };
        assert_eq!(r.get::<_, String>(1), want, "fact {i}");
    }
    let active: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'batcher' AND active", &[]).unwrap().get(0);
    assert_eq!(active, 50);
}

/// 16 connections each add a different value of one many-valued predicate at once: every value
/// is kept. Then 16 connections add the same value at once: one row, fifteen restatements.
#[test]
fn sixteen_writers_of_a_many_valued_predicate_keep_every_value_and_one_row_per_value() {
    let db = "am_it_many_race";
    let mut c = fresh_db(db);
    c.batch_execute("SELECT * FROM agent_memory.memory_reconcile('someone-else', NULL, NULL, NULL, 'seed', '[1,0,0,0,0,0,0,0]'::vector)")
        .unwrap();
    let writers = 16;
    let race = |same: bool| -> Vec<String> {
        fn reconcile(w: usize, c: &mut postgres::Client, value: String) -> String {
            let emb = Vector::from(Rng(w as u64 + 100).vector(8));
            c.query_one(
                "SELECT action FROM agent_memory.memory_reconcile('many-user', 'user', 'likes', $1, $2, $3::vector)",
                &[&value, &format!("Likes {value}"), &emb],
            )
            .unwrap()
            .get::<_, String>(0)
        }
        if same {
            at_once(db, writers, |w, c| reconcile(w, c, "chess".to_string()))
        } else {
            at_once(db, writers, |w, c| reconcile(w, c, format!("hobby-{w}")))
        }
    };
    let different = race(false);
    assert!(different.iter().all(|a| a == "ADD"), "{different:?}");
    let active: i64 = c
        .query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'many-user' AND predicate = 'likes' AND active", &[])
        .unwrap()
        .get(0);
    assert_eq!(active, writers as i64, "every value is kept");
    let same = race(true);
    assert_eq!(same.iter().filter(|a| *a == "ADD").count(), 1, "{same:?}");
    assert_eq!(same.iter().filter(|a| *a == "NONE").count(), writers - 1, "{same:?}");
    let chess: i64 =
        c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = 'many-user' AND object = 'chess'", &[]).unwrap().get(0);
    assert_eq!(chess, 1, "one row for the value, active");
}
