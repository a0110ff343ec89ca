//! memory_recall over real connections: bulk-loaded data, exact ranking checked from the client,
//! user isolation, and concurrent recalls that refresh the same rows.

use std::thread;

use agent_memory_tests::{connect, cosine, fresh_db, Rng};
use pgvector::Vector;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;

const DIMS: usize = 24;

/// Loads `users × per_user` memories by binary COPY; returns (user, id, embedding, importance).
fn load(client: &mut postgres::Client, users: usize, per_user: usize, seed: u64) -> Vec<(String, i64, Vec<f32>, f32)> {
    let vector_type: Type = client.prepare("SELECT $1::vector").unwrap().params()[0].clone();
    let mut rng = Rng(seed);
    let mut rows = Vec::new();
    {
        let sink = client
            .copy_in("COPY agent_memory.memories (user_id, content, emb, embedding_model, importance, last_hit_at) FROM STDIN BINARY")
            .unwrap();
        let types = [Type::TEXT, Type::TEXT, vector_type, Type::TEXT, Type::FLOAT4, Type::TIMESTAMPTZ];
        let mut w = BinaryCopyInWriter::new(sink, &types);
        let now = std::time::SystemTime::now();
        for u in 0..users {
            for i in 0..per_user {
                let user = format!("user-{u:03}");
                let emb = rng.vector(DIMS);
                let importance = ((rng.next_u64() % 101) as f32) / 100.0;
                // All rows share one last-hit time, so the exact ranking depends on similarity and
                // importance alone and the client can recompute it.
                w.write(&[&user, &format!("memory {u}-{i}"), &Vector::from(emb.clone()), &"m24", &importance, &now]).unwrap();
                rows.push((user, 0, emb, importance));
            }
        }
        w.finish().unwrap();
    }
    // Ids in load order.
    let ids: Vec<i64> = client.query("SELECT id FROM agent_memory.memories ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    for (row, id) in rows.iter_mut().zip(ids) {
        row.1 = id;
    }
    rows
}

#[test]
fn recall_over_a_socket_is_exact_and_scoped_to_the_user() {
    let mut c = fresh_db("am_it_recall_exact");
    let rows = load(&mut c, 20, 300, 7);
    let mut rng = Rng(99);
    for u in 0..20 {
        let user = format!("user-{u:03}");
        let q = rng.vector(DIMS);
        let got: Vec<(i64, f64)> = c
            .query(
                "SELECT id, similarity FROM agent_memory.memory_recall($1, $2::vector, 10, model => 'm24', touch => false)",
                &[&user, &Vector::from(q.clone())],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        // The client's own exact ranking: equal ages, so similarity × importance factor decides.
        let mut want: Vec<(i64, f64)> =
            rows.iter().filter(|r| r.0 == user).map(|r| (r.1, cosine(&q, &r.2) * (0.8 + 0.4 * r.3 as f64))).collect();
        want.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        let want_ids: Vec<i64> = want.iter().take(10).map(|w| w.0).collect();
        let got_ids: Vec<i64> = got.iter().map(|g| g.0).collect();
        assert_eq!(got_ids, want_ids, "user {user}");
        for (id, sim) in &got {
            let row = rows.iter().find(|r| r.1 == *id).unwrap();
            assert_eq!(row.0, user, "memory {id} belongs to another user");
            assert!((sim - cosine(&q, &row.2)).abs() < 1e-5);
        }
    }
}

#[test]
fn concurrent_recalls_lose_no_hits() {
    let mut c = fresh_db("am_it_recall_touch");
    load(&mut c, 2, 50, 11);
    let threads = 8;
    let calls = 40;
    let k = 3i32;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            thread::spawn(move || {
                let mut c = connect("am_it_recall_touch");
                let mut rng = Rng(1000 + t);
                for _ in 0..calls {
                    let q = Vector::from(rng.vector(DIMS));
                    let n = c
                        .query("SELECT id FROM agent_memory.memory_recall('user-000', $1::vector, $2, model => 'm24')", &[&q, &k])
                        .unwrap()
                        .len();
                    assert_eq!(n, k as usize);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total: i64 =
        c.query_one("SELECT sum(hit_count)::bigint FROM agent_memory.memories WHERE user_id = 'user-000'", &[]).unwrap().get(0);
    assert_eq!(total, threads as i64 * calls as i64 * k as i64);
    let other: i64 =
        c.query_one("SELECT sum(hit_count)::bigint FROM agent_memory.memories WHERE user_id = 'user-001'", &[]).unwrap().get(0);
    assert_eq!(other, 0, "another user's memories were touched");
}

#[test]
fn vector_halfvec_and_text_parameters_rank_alike() {
    let mut c = fresh_db("am_it_recall_halfvec");
    load(&mut c, 1, 100, 3);
    let q: Vec<f32> = Rng(5).vector(DIMS);
    let full: Vec<i64> = c
        .query(
            "SELECT id FROM agent_memory.memory_recall('user-000', $1::vector, 5, model => 'm24', touch => false)",
            &[&Vector::from(q.clone())],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let half = pgvector::HalfVector::from_f32_slice(&q);
    let halved: Vec<i64> = c
        .query("SELECT id FROM agent_memory.memory_recall('user-000', $1::halfvec, 5, model => 'm24', touch => false)", &[&half])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    // An untyped parameter resolves to the text form, parsed by pgvector's input function.
    let text = format!("[{}]", q.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","));
    let from_text: Vec<i64> = c
        .query("SELECT id FROM agent_memory.memory_recall('user-000', $1, 5, model => 'm24', touch => false)", &[&text])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(full.len(), 5);
    assert_eq!(full, halved);
    assert_eq!(full, from_text);
}
