//! Hybrid recall's fusion over real connections: convex fusion's scores, reciprocal rank fusion
//! when asked for, and the share a strong hit gives the memories said just before and after it.

use agent_memory_tests::fresh_db;
use pgvector::Vector;
use postgres::Client;

/// A unit vector at `angle` (radians) from the query `[1, 0, 0, 0]`, in the plane of the first
/// two axes.
fn at(angle: f32) -> Vector {
    Vector::from(vec![angle.cos(), angle.sin(), 0.0, 0.0])
}

/// Twelve fillers said days before (cosine 0 to the query, no query word), then a question the
/// query matches on both channels, and right after it its answer, which matches neither (cosine
/// −0.5). Returns (question id, answer id).
fn conversation(c: &mut Client, user: &str, answer_kind: &str, answer_after: &str) -> (i64, i64) {
    for i in 0..12 {
        c.execute(
            "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at, importance)
             VALUES ($1, 'episodic', $2, $3, 'm4', now() - interval '5 days' + $4 * interval '1 hour', now(), 0.5)",
            &[&user, &format!("filler line number {i} about gardening"), &at(std::f32::consts::FRAC_PI_2), &(i as f64)],
        )
        .unwrap();
    }
    let q: i64 = c
        .query_one(
            "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at, importance)
             VALUES ($1, 'episodic', 'What is the name of your cat?', $2, 'm4', now() - interval '1 day', now(), 0.5) RETURNING id",
            &[&user, &at(0.05)],
        )
        .unwrap()
        .get(0);
    let a: i64 = c
        .query_one(
            &format!(
                "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at, importance)
                 VALUES ($1, '{answer_kind}', 'She is called Mochi', $2, 'm4', now() - interval '1 day' + interval '{answer_after}', now(), 0.5)
                 RETURNING id"
            ),
            &[&user, &at(2.0 * std::f32::consts::FRAC_PI_3)],
        )
        .unwrap()
        .get(0);
    (q, a)
}

fn hybrid(c: &mut Client, user: &str, k: i32, extra: &str) -> Vec<(i64, f64, Option<i32>, Option<i32>)> {
    c.query(
        &format!(
            "SELECT id, score, vector_rank, keyword_rank FROM agent_memory.memory_recall($1, $2::vector, $3, model => 'm4', touch => false,
                    query_text => 'name of the cat' {extra})"
        ),
        &[&user, &at(0.0), &k],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

#[test]
fn the_memory_said_right_after_a_strong_hit_comes_up_with_it() {
    let mut c = fresh_db("am_it_fusion_neighbours");
    let (q, a) = conversation(&mut c, "ann", "episodic", "1 minute");
    let got = hybrid(&mut c, "ann", 3, "");
    assert_eq!(got[0].0, q, "the question first");
    // First on both channels: 0.5 × 1 + 0.5 × 1.
    assert!((got[0].1 - 1.0).abs() < 1e-9, "score {}", got[0].1);
    assert_eq!(got[1].0, a, "its answer second: {got:?}");
    // The answer is last in the vector channel and has no query word: its score is its share.
    assert!((got[1].1 - 0.3).abs() < 1e-6, "score {}", got[1].1);
    assert_eq!(got[1].3, None);

    // Without the share, the answer is last of all.
    c.batch_execute("SET agent_memory.neighbour_share = 0").unwrap();
    let got = hybrid(&mut c, "ann", 20, "");
    assert_eq!(got.last().unwrap().0, a, "{got:?}");
    c.batch_execute("RESET agent_memory.neighbour_share").unwrap();

    // A share of its own size.
    c.batch_execute("SET agent_memory.neighbour_share = 0.45").unwrap();
    let got = hybrid(&mut c, "ann", 2, "");
    assert!((got[1].1 - 0.45).abs() < 1e-6, "score {}", got[1].1);
    c.batch_execute("RESET agent_memory.neighbour_share").unwrap();

    // The call's filters hold for neighbours too: kinds, time window.
    let got = hybrid(&mut c, "ann", 20, ", kinds => ARRAY['episodic'], until => now() - interval '1 day' + interval '30 seconds'");
    assert!(!got.iter().any(|r| r.0 == a), "the answer is outside the window: {got:?}");
    assert_eq!(got[0].0, q);
}

#[test]
fn neighbours_are_close_in_time_of_the_same_kind_filter_and_the_user_alone() {
    let mut c = fresh_db("am_it_fusion_far");
    // Said an hour later: another conversation, not a neighbour.
    let (_, far) = conversation(&mut c, "bo", "episodic", "1 hour");
    let got = hybrid(&mut c, "bo", 20, "");
    assert_eq!(got.last().unwrap().0, far, "{got:?}");
    // A neighbour of a kind the call leaves out is not returned.
    let (q, semantic) = conversation(&mut c, "cy", "semantic", "1 minute");
    let got = hybrid(&mut c, "cy", 20, ", kinds => ARRAY['episodic']");
    assert_eq!(got[0].0, q);
    assert!(!got.iter().any(|r| r.0 == semantic), "{got:?}");
    // Another user's memory written right after the question is never its neighbour.
    let q: i64 = c
        .query_one(
            "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, importance)
             VALUES ('dee', 'episodic', 'What is the name of your cat?', $1, 'm4', now(), 0.5) RETURNING id",
            &[&at(0.05)],
        )
        .unwrap()
        .get(0);
    let other: i64 = c
        .query_one(
            "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, importance)
             VALUES ('eve', 'episodic', 'Eve owns a parrot', $1, 'm4', now(), 0.5) RETURNING id",
            &[&at(2.0)],
        )
        .unwrap()
        .get(0);
    assert_eq!(other, q + 1);
    let got = hybrid(&mut c, "dee", 20, "");
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), vec![q]);
}

#[test]
fn reciprocal_rank_fusion_when_asked_for() {
    let mut c = fresh_db("am_it_fusion_rrf");
    let (q, _) = conversation(&mut c, "ann", "episodic", "1 minute");
    c.batch_execute("SET agent_memory.hybrid_fusion = 'rrf'; SET agent_memory.neighbour_share = 0").unwrap();
    let got = hybrid(&mut c, "ann", 3, "");
    assert_eq!(got[0].0, q);
    assert!((got[0].1 - 2.0 / 61.0).abs() < 1e-9, "score {}", got[0].1);
    assert_eq!((got[0].2, got[0].3), (Some(1), Some(1)));
    let err = c.batch_execute("SET agent_memory.hybrid_fusion = 'sum'").unwrap_err();
    assert_eq!(err.as_db_error().unwrap().code().code(), "22023");
}

/// A unit vector at `angle` from `[1, 0, 0, 0]` towards `[0, 0, 1, 0]`.
fn towards_third(angle: f32) -> Vector {
    Vector::from(vec![angle.cos(), 0.0, angle.sin(), 0.0])
}

#[test]
fn hybrid_recall_ranks_again_with_the_query_moved_towards_its_best_hits() {
    let mut c = fresh_db("am_it_fusion_feedback");
    let user = "feedback-user";
    let mut insert = |content: &str, emb: Vector, days_ago: i32| -> i64 {
        c.query_one(
            "INSERT INTO agent_memory.memories (user_id, kind, content, emb, embedding_model, created_at, last_hit_at, importance)
             VALUES ($1, 'episodic', $2, $3, 'm4', now() - $4 * interval '1 day', now(), 0.5) RETURNING id",
            &[&user, &content, &emb, &(days_ago as f64)],
        )
        .unwrap()
        .get(0)
    };
    // Three hits on both channels, leaning towards a topic the query only touches.
    let hits: Vec<i64> = (0..3).map(|i| insert(&format!("the cat's name, note {i}"), towards_third(0.6), 10 + i)).collect();
    // Of the topic of the hits, without the query's words: further from the query than `other`.
    let related = insert("she sleeps on the red blanket", towards_third(1.2), 20);
    let other = insert("the car needs new tyres", towards_third(-1.1), 21);
    let q = Vector::from(vec![1.0f32, 0.0, 0.0, 0.0]);
    let recall = |c: &mut Client, touch: bool| -> Vec<(i64, f64)> {
        c.query(
            "SELECT id, similarity FROM agent_memory.memory_recall($1, $2::vector, 4, model => 'm4', touch => $3, query_text => 'name of the cat')",
            &[&user, &q, &touch],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
    };
    let ids = |r: &[(i64, f64)]| r.iter().map(|x| x.0).collect::<Vec<_>>();

    // One ranking: the fourth place goes to the memory nearer the query.
    c.batch_execute("SET agent_memory.hybrid_feedback = 0").unwrap();
    let once = recall(&mut c, false);
    assert_eq!(ids(&once)[3], other, "{once:?}");
    assert!(!ids(&once).contains(&related));

    // Two rankings (the default): the query moved towards the three hits finds the related one.
    c.batch_execute("RESET agent_memory.hybrid_feedback").unwrap();
    let twice = recall(&mut c, false);
    let mut first_three = ids(&twice)[..3].to_vec();
    first_three.sort();
    assert_eq!(first_three, hits);
    assert_eq!(ids(&twice)[3], related, "{twice:?}");
    // A call's results do not depend on its k beyond their count.
    let one: i64 = c
        .query_one(
            "SELECT id FROM agent_memory.memory_recall($1, $2::vector, 1, model => 'm4', touch => false, query_text => 'name of the cat')",
            &[&user, &q],
        )
        .unwrap()
        .get(0);
    assert_eq!(one, twice[0].0);
    // Its similarity is the one to the caller's query.
    let shown = twice[3].1;
    assert!((shown - 1.2f64.cos()).abs() < 1e-5, "similarity {shown}");

    // Above exact_limit a user's call ranks once.
    c.batch_execute("SET agent_memory.exact_limit = 4").unwrap();
    assert_eq!(ids(&recall(&mut c, false)), ids(&once));
    c.batch_execute("RESET agent_memory.exact_limit").unwrap();

    // Vector-only recall is not moved.
    let vector_only: Vec<i64> = c
        .query("SELECT id FROM agent_memory.memory_recall($1, $2::vector, 5, model => 'm4', touch => false)", &[&user, &q])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(vector_only.iter().position(|&i| i == other) < vector_only.iter().position(|&i| i == related));

    // Only the ranking returned records hits: once each, and none for what only the first saw.
    c.batch_execute("SET agent_memory.hybrid_feedback = 3").unwrap();
    let returned = ids(&recall(&mut c, true));
    let counts: Vec<(i64, i32)> = c
        .query("SELECT id, hit_count FROM agent_memory.memories WHERE user_id = $1 ORDER BY id", &[&user])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (id, n) in counts {
        assert_eq!(n, i32::from(returned.contains(&id)), "memory {id}: {n} hits");
    }
}
