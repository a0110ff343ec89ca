//! Recall through packed embeddings under real concurrency: while one connection rewrites
//! embeddings and texts, raises importance, changes kinds, archives and expires memories,
//! deletes memories and writes them again under their ids, and adds new ones, another rebuilds
//! the user's packs over and over, a third vacuums (so pages turn visible to all, and hybrid
//! recall counts words from the packs), and readers compare recall (vector, hybrid and keyword)
//! with and without packs inside one snapshot. Every comparison must be equal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use agent_memory_tests::{connect, fresh_db, Rng};
use pgvector::Vector;

const DIMS: usize = 48;
const USER: &str = "packed-user";

const WORDS: [&str; 16] = [
    "refund", "parcel", "ordered", "hiking", "trips", "coffee", "tea", "meeting", "project", "deadline", "birthday", "gift", "doctor",
    "flight", "hotel", "guitar",
];
const QUESTIONS: [&str; 4] = ["the refund for my parcel", "hiking trip", "coffee or tea", "doctor appointment before the flight"];

/// A ranking as text: id, score, similarity and channel ranks of each result.
fn ranking(
    c: &mut postgres::Transaction<'_>,
    packed: bool,
    q: Option<&[f32]>,
    text: Option<&str>,
    k: i32,
    decay: Option<&str>,
) -> Vec<String> {
    c.execute("SELECT set_config('agent_memory.packed_recall', $1, true)", &[&packed.to_string()]).unwrap();
    c.query(
        "SELECT concat_ws(':', id, round(score::numeric, 9), round(similarity::numeric, 6), vector_rank, keyword_rank)            FROM agent_memory.memory_recall($1, $2::vector, $3, model => 'm48', decay => $4, touch => false, query_text => $5)",
        &[&USER, &q.map(|q| Vector::from(q.to_vec())), &k, &decay, &text],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[test]
fn recall_with_packs_equals_recall_without_while_everything_changes() {
    let db = "am_it_packs";
    let mut c = fresh_db(db);
    c.execute(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance) \
         SELECT $1, 'memory ' || g || ': ' || (SELECT string_agg(($2::text[])[1 + (g * 5 + j * 7 + g * j) % 16], ' ') \
                                               FROM generate_series(1, 1 + g % 7) j), (SELECT array_agg(sin(g * 0.917 * j + j * 0.31))::real[]::vector FROM generate_series(1, 48) j), \
                'm48', (g % 10) / 10.0 FROM generate_series(1, 1500) g",
        &[&USER, &WORDS.to_vec()],
    )
    .unwrap();
    let packed: i64 = c.query_one("SELECT agent_memory.memory_pack($1)", &[&USER]).unwrap().get(0);
    assert_eq!(packed, 1500);

    let stop = Arc::new(AtomicBool::new(false));
    // The writer: every kind of change the stale marks must catch, and some they need not.
    let writer = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut c = connect(db);
            let mut rng = Rng(17);
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) && rounds < 400 {
                let ids: Vec<i64> = c
                    .query("SELECT id FROM agent_memory.memories WHERE user_id = $1 AND active ORDER BY random() LIMIT 4", &[&USER])
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let v = Vector::from(rng.vector(DIMS));
                let text = format!("{} {} {}", WORDS[rounds % 16], WORDS[(rounds * 7) % 16], WORDS[(rounds * 3) % 16]);
                match rounds % 9 {
                    5 => c.execute("UPDATE agent_memory.memories SET content = $2 WHERE id = $1", &[&ids[0], &text]),
                    6 => c.execute(
                        "UPDATE agent_memory.memories SET kind = CASE kind WHEN 'episodic' THEN 'semantic' ELSE 'episodic' END WHERE id = $1",
                        &[&ids[0]],
                    ),
                    7 => c.execute(
                        "UPDATE agent_memory.memories SET archived_at = CASE WHEN archived_at IS NULL THEN now() END WHERE id = ANY ($1)",
                        &[&ids],
                    ),
                    8 => c.execute("UPDATE agent_memory.memories SET expires_at = now() - interval '1 hour' WHERE id = $1", &[&ids[3]]),
                    0 => c.execute("UPDATE agent_memory.memories SET emb = $2 WHERE id = $1", &[&ids[0], &v]),
                    1 => c.execute("UPDATE agent_memory.memories SET importance = 1 WHERE id = ANY ($1)", &[&ids]),
                    2 => {
                        let mut t = c.transaction().unwrap();
                        t.execute("DELETE FROM agent_memory.memories WHERE id = $1", &[&ids[1]]).unwrap();
                        t.execute(
                            "INSERT INTO agent_memory.memories (id, user_id, content, emb, embedding_model, importance) \
                             VALUES ($1, $2, 'written again', $3, 'm48', 0.9)",
                            &[&ids[1], &USER, &v],
                        )
                        .unwrap();
                        t.commit().map(|_| 1)
                    }
                    3 => c.execute(
                        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance) VALUES ($1, 'new', $2, 'm48', 0.7)",
                        &[&USER, &v],
                    ),
                    _ => c.execute(
                        "UPDATE agent_memory.memories SET active = false, retired_at = now(), retired_reason = 'deleted' WHERE id = $1",
                        &[&ids[2]],
                    ),
                }
                .unwrap();
                rounds += 1;
            }
            rounds
        })
    };
    // The packer: rebuilds as fast as it can, as the worker would now and then.
    let packer = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut c = connect(db);
            let mut builds = 0;
            while !stop.load(Ordering::Relaxed) {
                c.query_one("SELECT agent_memory.memory_pack($1)", &[&USER]).unwrap();
                builds += 1;
            }
            builds
        })
    };
    // The vacuum, as autovacuum would run it: pages turn visible to all again.
    let vacuum = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut c = connect(db);
            let mut runs = 0;
            while !stop.load(Ordering::Relaxed) {
                c.batch_execute("VACUUM agent_memory.memories").unwrap();
                runs += 1;
                thread::sleep(std::time::Duration::from_millis(50));
            }
            runs
        })
    };
    // Two readers: one snapshot per comparison.
    let readers: Vec<_> = (0..2)
        .map(|r| {
            thread::spawn(move || {
                let mut c = connect(db);
                let mut rng = Rng(100 + r);
                let mut compared = 0;
                for i in 0..120 {
                    let q = rng.vector(DIMS);
                    let k = [1, 5, 20][i % 3];
                    let decay = [None, Some("none")][i % 2];
                    // Vector-only, hybrid and keyword-only in turn.
                    let (q, text) = match i % 4 {
                        0 | 1 => (Some(&q[..]), None),
                        2 => (Some(&q[..]), Some(QUESTIONS[i / 4 % 4])),
                        _ => (None, Some(QUESTIONS[i / 4 % 4])),
                    };
                    let mut t = c.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).start().unwrap();
                    let with = ranking(&mut t, true, q, text, k, decay);
                    let without = ranking(&mut t, false, q, text, k, decay);
                    t.commit().unwrap();
                    assert_eq!(with, without, "reader {r}, query {i} (k {k}, decay {decay:?}, text {text:?})");
                    if text.is_none() {
                        assert_eq!(with.len(), k as usize);
                    } else {
                        assert!(!with.is_empty(), "the words of {text:?} match memories");
                    }
                    compared += 1;
                }
                compared
            })
        })
        .collect();
    let compared: usize = readers.into_iter().map(|h| h.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    let builds = packer.join().unwrap();
    let vacuums = vacuum.join().unwrap();
    assert_eq!(compared, 240);
    assert!(
        rounds > 10 && builds > 2 && vacuums > 2,
        "the writer ({rounds} rounds), the packer ({builds} builds) and vacuum ({vacuums} runs) all ran"
    );

    // Quiet now: after a last rebuild nothing is marked, and the packs hold every active memory.
    let packed: i64 = c.query_one("SELECT agent_memory.memory_pack($1)", &[&USER]).unwrap().get(0);
    let active: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE user_id = $1 AND active", &[&USER]).unwrap().get(0);
    assert_eq!(packed, active);
    let stale: i64 = c.query_one("SELECT count(*) FROM agent_memory.memory_pack_stale", &[]).unwrap().get(0);
    assert_eq!(stale, 0);
}

#[test]
fn the_worker_packs_a_large_user_by_itself() {
    // The workers' database of the test server (agent_memory.worker_databases), with a short
    // pack interval and a small threshold.
    let mut c = agent_memory_tests::worker_database("agent_memory_workers");
    agent_memory_tests::alter_system(&mut c, &[("pack_interval", "1"), ("pack_min_memories", "50")]);
    c.execute("DELETE FROM agent_memory.memories WHERE user_id IN ('worker-packed', 'worker-small')", &[]).unwrap();
    c.execute(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) \
         SELECT CASE WHEN g <= 80 THEN 'worker-packed' ELSE 'worker-small' END, 'memory ' || g, \
                (SELECT array_agg(cos(g * 1.1 * j))::real[]::vector FROM generate_series(1, 8) j), 'm8' FROM generate_series(1, 100) g",
        &[],
    )
    .unwrap();
    let mut packed = 0i64;
    for _ in 0..300 {
        packed = c
            .query_one("SELECT coalesce(sum(memories), 0)::bigint FROM agent_memory.memory_packs WHERE user_id = 'worker-packed' AND part = 'embeddings'", &[])
            .unwrap()
            .get(0);
        if packed == 80 {
            break;
        }
        thread::sleep(std::time::Duration::from_millis(100));
    }
    let small: i64 = c.query_one("SELECT count(*) FROM agent_memory.memory_packs WHERE user_id = 'worker-small'", &[]).unwrap().get(0);
    for statement in
        ["ALTER SYSTEM RESET agent_memory.pack_interval", "ALTER SYSTEM RESET agent_memory.pack_min_memories", "SELECT pg_reload_conf()"]
    {
        c.batch_execute(statement).unwrap();
    }
    assert_eq!(packed, 80, "the worker packed the user above pack_min_memories");
    assert_eq!(small, 0, "and left the smaller one alone");
}
