//! Races between sessions that the shared parts must survive, against the real test server:
//! an erasure that meets a pack rebuild in flight (either way round) leaves nothing of the user,
//! in the packs or anywhere; and two sessions that make two tasks each other's parent at once
//! never both commit.

use std::thread;
use std::time::Duration;

use agent_memory_tests::{connect, fresh_db, Rng};
use pgvector::Vector;
use postgres::Client;

fn memories_of(c: &mut Client, user: &str, n: usize, seed: u64) {
    let mut rng = Rng(seed);
    for i in 0..n {
        c.execute(
            "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model) VALUES ($1, $2, $3, 'race8')",
            &[&user, &format!("note {i} of {user}"), &Vector::from(rng.vector(8))],
        )
        .unwrap();
    }
}

/// Rows of `user` left in every table that holds a user's data or a copy of it.
fn left_of(c: &mut Client, user: &str) -> Vec<(&'static str, i64)> {
    ["memories", "turns", "tasks", "memory_packs", "memory_pack_users", "memory_pack_stale", "predicate_declarations"]
        .iter()
        .map(|t| (*t, c.query_one(&format!("SELECT count(*) FROM agent_memory.{t} WHERE user_id = $1"), &[&user]).unwrap().get(0)))
        .filter(|(_, n): &(&str, i64)| *n > 0)
        .collect()
}

#[test]
fn an_erasure_racing_a_pack_rebuild_leaves_no_pack_of_the_user() {
    const DB: &str = "agent_memory_race_erase";
    let mut c = fresh_db(DB);
    memories_of(&mut c, "pr", 300, 1);
    memories_of(&mut c, "pr-other", 300, 2);
    c.query_one("SELECT agent_memory.memory_pack('pr-other')", &[]).unwrap();

    // The rebuild first: it holds its transaction open while the erasure comes.
    let rebuild = thread::spawn(|| {
        let mut s1 = connect(DB);
        let mut t = s1.transaction().unwrap();
        let packed: i64 = t.query_one("SELECT agent_memory.memory_pack('pr')", &[]).unwrap().get(0);
        thread::sleep(Duration::from_millis(1500));
        t.commit().unwrap();
        packed
    });
    thread::sleep(Duration::from_millis(500));
    let mut s2 = connect(DB);
    let erased: i64 = s2.query_one("SELECT memories FROM agent_memory.memory_erase('pr')", &[]).unwrap().get(0);
    assert_eq!(rebuild.join().unwrap(), 300, "the rebuild packed the user's memories");
    assert_eq!(erased, 300, "the erasure deleted every memory");
    assert_eq!(left_of(&mut c, "pr"), vec![], "the erasure left rows of the user behind");

    // The erasure first: a rebuild that comes while it is open finds nothing once it commits.
    memories_of(&mut c, "pr", 300, 3);
    let erase = thread::spawn(|| {
        let mut s1 = connect(DB);
        let mut t = s1.transaction().unwrap();
        let n: i64 = t.query_one("SELECT memories FROM agent_memory.memory_erase('pr')", &[]).unwrap().get(0);
        thread::sleep(Duration::from_millis(1500));
        t.commit().unwrap();
        n
    });
    thread::sleep(Duration::from_millis(500));
    let packed: i64 = s2.query_one("SELECT agent_memory.memory_pack('pr')", &[]).unwrap().get(0);
    assert_eq!(erase.join().unwrap(), 300);
    assert_eq!(packed, 0, "a rebuild after the erasure packed memories of an erased user");
    assert_eq!(left_of(&mut c, "pr"), vec![], "the erasure left rows of the user behind");

    // The other user's packs are untouched, and recall of them still answers exactly.
    let other: i64 = c.query_one("SELECT count(*) FROM agent_memory.memory_packs WHERE user_id = 'pr-other'", &[]).unwrap().get(0);
    assert!(other > 0);
}

fn task_client() -> Client {
    let mut c = connect("agent_memory_race_tasks");
    c.batch_execute("SET agent_memory.user_id = 'tk'").unwrap();
    c
}

#[test]
fn two_sessions_never_commit_a_cycle_of_tasks() {
    let mut c = fresh_db("agent_memory_race_tasks");
    for isolation in ["READ COMMITTED", "REPEATABLE READ"] {
        c.batch_execute(
            "DELETE FROM agent_memory.tasks WHERE user_id = 'tk';
             INSERT INTO agent_memory.tasks (user_id, task_id) VALUES ('tk', 'ra'), ('tk', 'rb');",
        )
        .unwrap();
        let go = std::sync::Arc::new(std::sync::Barrier::new(2));
        let sessions: Vec<_> = [("ra", "rb"), ("rb", "ra")]
            .into_iter()
            .map(|(task, parent)| {
                let go = go.clone();
                thread::spawn(move || {
                    let mut s = task_client();
                    let t = s.build_transaction().isolation_level(match isolation {
                        "READ COMMITTED" => postgres::IsolationLevel::ReadCommitted,
                        _ => postgres::IsolationLevel::RepeatableRead,
                    });
                    let mut t = t.start().unwrap();
                    t.query("SELECT 1", &[]).unwrap(); // the snapshot of a repeatable read starts here
                    go.wait();
                    let r = t.execute(
                        "UPDATE agent_memory.tasks SET parent_task_id = $2 WHERE user_id = 'tk' AND task_id = $1",
                        &[&task, &parent],
                    );
                    thread::sleep(Duration::from_millis(300));
                    match r {
                        Ok(_) => t.commit().map(|_| ()).map_err(|e| e.code().map(|s| s.code().to_string())),
                        Err(e) => Err(e.code().map(|s| s.code().to_string())),
                    }
                })
            })
            .collect();
        let outcomes: Vec<_> = sessions.into_iter().map(|h| h.join().unwrap()).collect();
        let committed = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(committed, 1, "{isolation}: exactly one of the two commits: {outcomes:?}");
        for o in outcomes.iter().filter_map(|o| o.as_ref().err()) {
            // READ COMMITTED: the second sees the first's parent and refuses the cycle (22023).
            // REPEATABLE READ: its snapshot predates the first's commit, so it fails to serialise
            // (40001), or the deadlock detector ends the wait of one of the two (40P01): retry.
            let expected: &[&str] = if isolation == "READ COMMITTED" { &["22023"] } else { &["22023", "40001", "40P01"] };
            assert!(o.as_deref().is_some_and(|c| expected.contains(&c)), "{isolation}: the other fails clearly: {o:?}");
        }
        let parents: i64 =
            c.query_one("SELECT count(*) FROM agent_memory.tasks WHERE user_id = 'tk' AND parent_task_id IS NOT NULL", &[]).unwrap().get(0);
        assert_eq!(parents, 1, "{isolation}: one parent link, no cycle");
    }
}
