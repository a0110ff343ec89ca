//! Time in recall and context over real connections: `since` and `until` bound when a memory was
//! said (half-open, on every channel, packed or not), `as_of` sees the facts that held at a
//! moment (superseded versions as they were, `valid_until` judged then, memories the user asked
//! to forget and forgotten ones never), and windows no memory can be in are refused.

use std::collections::BTreeSet;

use agent_memory_tests::{fresh_db, Rng};
use pgvector::Vector;
use postgres::Client;

const DIMS: usize = 8;
/// The first memory's time; memory `i` is said `i` hours later.
const T0: &str = "2026-03-01 00:00:00+00";

fn hour(i: i64) -> String {
    format!("timestamptz '{T0}' + interval '{i} hours'")
}

/// 60 memories of user `tia` (one an hour from T0, every third about "lanterns") and 20 of
/// `other` in the same hours; returns tia's ids by hour.
fn load(c: &mut Client) -> Vec<i64> {
    let mut rng = Rng(5);
    let mut ids = Vec::new();
    for i in 0..60i64 {
        let topic = if i % 3 == 0 { "lanterns" } else { "rivers" };
        let id: i64 = c
            .query_one(
                &format!(
                    "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, created_at, last_hit_at)
                     VALUES ('tia', $1, $2, 'm8', 0.5, {h}, {h}) RETURNING id",
                    h = hour(i)
                ),
                &[&format!("note {i} about {topic}"), &Vector::from(rng.vector(DIMS))],
            )
            .unwrap()
            .get(0);
        ids.push(id);
    }
    for i in 0..20i64 {
        c.execute(
            &format!(
                "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, created_at, last_hit_at)
                 VALUES ('other', 'other note about lanterns', $1, 'm8', 0.5, {h}, {h})",
                h = hour(i * 3)
            ),
            &[&Vector::from(rng.vector(DIMS))],
        )
        .unwrap();
    }
    ids
}

fn recall_ids(c: &mut Client, sql: &str, q: &Vector) -> Vec<i64> {
    c.query(sql, &[q]).unwrap_or_else(|e| panic!("{sql}: {e}")).iter().map(|r| r.get(0)).collect()
}

#[test]
fn since_and_until_bound_when_a_memory_was_said_on_every_channel() {
    let mut c = fresh_db("am_it_time_window");
    let ids = load(&mut c);
    let q = Vector::from(Rng(77).vector(DIMS));
    // (since, until) in hours from T0; None is unbounded. The bounds fall exactly on memories.
    let windows: [(Option<i64>, Option<i64>); 5] =
        [(Some(10), Some(20)), (Some(50), None), (None, Some(5)), (Some(0), Some(60)), (Some(7), Some(8))];
    let bound = |b: Option<i64>| b.map(hour).unwrap_or_else(|| "NULL".into());
    for packed in [false, true] {
        if packed {
            let n: i64 = c.query_one("SELECT agent_memory.memory_pack('tia', 'm8')", &[]).unwrap().get(0);
            assert_eq!(n, 60, "the user is packed");
        }
        c.batch_execute(&format!("SET agent_memory.packed_recall = {packed}")).unwrap();
        let unbounded =
            recall_ids(&mut c, "SELECT id FROM agent_memory.memory_recall('tia', $1::vector, 100, model => 'm8', touch => false)", &q);
        assert_eq!(unbounded.len(), 60);
        for (since, until) in windows {
            let inside = |h: i64| since.is_none_or(|s| h >= s) && until.is_none_or(|u| h < u);
            let want: BTreeSet<i64> = (0..60).filter(|h| inside(*h)).map(|h| ids[h as usize]).collect();
            let args = format!("since => {}, until => {}", bound(since), bound(until));
            let label = format!("packed {packed}, {args}");

            // Vector: the same ranking as without a window, the memories outside it left out.
            let got = recall_ids(
                &mut c,
                &format!("SELECT id FROM agent_memory.memory_recall('tia', $1::vector, 100, model => 'm8', touch => false, {args})"),
                &q,
            );
            let expected: Vec<i64> = unbounded.iter().copied().filter(|id| want.contains(id)).collect();
            assert_eq!(got, expected, "vector, {label}");
            let top: Vec<i64> = recall_ids(
                &mut c,
                &format!("SELECT id FROM agent_memory.memory_recall('tia', $1::vector, 3, model => 'm8', touch => false, {args})"),
                &q,
            );
            assert_eq!(top, expected.iter().copied().take(3).collect::<Vec<_>>(), "vector top 3, {label}");

            // Hybrid: every memory inside, none outside.
            let got: BTreeSet<i64> = recall_ids(
                &mut c,
                &format!(
                    "SELECT id FROM agent_memory.memory_recall('tia', $1::vector, 100, model => 'm8', touch => false,
                                                               query_text => 'lanterns', {args})"
                ),
                &q,
            )
            .into_iter()
            .collect();
            assert_eq!(got, want, "hybrid, {label}");

            // Keyword only: the memories inside that have the word.
            let got: BTreeSet<i64> = c
                .query(
                    &format!(
                        "SELECT id FROM agent_memory.memory_recall('tia', NULL::vector, 100, model => 'm8', touch => false,
                                                                   query_text => 'lanterns', {args})"
                    ),
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            let want_words: BTreeSet<i64> = (0..60).filter(|h| inside(*h) && h % 3 == 0).map(|h| ids[h as usize]).collect();
            assert_eq!(got, want_words, "keyword, {label}");
        }
    }
    // Consecutive windows split the memories without overlap or gap.
    let mut all = Vec::new();
    for (s, u) in [(0, 24), (24, 48), (48, 72)] {
        all.extend(recall_ids(
            &mut c,
            &format!(
                "SELECT id FROM agent_memory.memory_recall('tia', $1::vector, 100, model => 'm8', touch => false,
                                                           since => {}, until => {})",
                hour(s),
                hour(u)
            ),
            &q,
        ));
    }
    all.sort();
    assert_eq!(all, ids);
}

/// Inserts a memory of `ann` said on day `created` of January 2026, retired on day `retired`
/// for `reason` (active when None), valid until day `valid_until`.
fn version(c: &mut Client, content: &str, emb: &[f32], created: i64, retired: Option<(&str, i64)>, valid_until: Option<i64>) -> i64 {
    let day = |d: i64| format!("timestamptz '2026-01-01 00:00+00' + interval '{} days'", d - 1);
    let (active, reason, retired_at) = match retired {
        Some((r, d)) => ("false", format!("'{r}'"), day(d)),
        None => ("true", "NULL".into(), "NULL".into()),
    };
    let valid = valid_until.map(day).unwrap_or_else(|| "NULL".into());
    c.query_one(
        &format!(
            "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model, importance, created_at, last_hit_at,
                                                active, retired_reason, retired_at, valid_until)
             VALUES ('ann', $1, $2, 'm8', 0.5, {c0}, {c0}, {active}, {reason}, {retired_at}, {valid})
             RETURNING id",
            c0 = day(created)
        ),
        &[&content, &Vector::from(emb.to_vec())],
    )
    .unwrap()
    .get(0)
}

#[test]
fn as_of_sees_the_facts_that_held_at_that_moment() {
    let mut c = fresh_db("am_it_time_as_of");
    let mut rng = Rng(21);
    let mut e = || rng.vector(DIMS);
    let vim = version(&mut c, "Ann uses vim", &e(), 1, Some(("superseded", 10)), None);
    let emacs = version(&mut c, "Ann uses emacs", &e(), 10, None, None);
    let _oslo = version(&mut c, "Ann lives in Oslo", &e(), 2, Some(("deleted", 20)), None);
    let rome = version(&mut c, "Ann plans a trip to Rome", &e(), 3, None, Some(15));
    let _evicted = version(&mut c, "Ann once mentioned a bakery", &e(), 1, Some(("evicted", 30)), None);
    let _summarized = version(&mut c, "Ann walked by the river", &e(), 1, Some(("summarized", 30)), None);
    let _expired = version(&mut c, "Ann is at a conference", &e(), 1, Some(("expired", 30)), None);
    let q = Vector::from(e());
    let mut at = |day: &str| -> BTreeSet<i64> {
        recall_ids(
            &mut c,
            &format!("SELECT id FROM agent_memory.memory_recall('ann', $1::vector, 50, model => 'm8', touch => false, as_of => {day})"),
            &q,
        )
        .into_iter()
        .collect()
    };
    let set = |v: &[i64]| v.iter().copied().collect::<BTreeSet<i64>>();
    // Oslo was deleted at the user's word on the 20th: no moment brings it back.
    assert_eq!(at("'2026-01-05 00:00+00'"), set(&[vim, rome]), "before emacs: vim, the Rome plan");
    // At the very moment of the change, the new version holds and the old one no longer does.
    assert_eq!(at("'2026-01-10 00:00+00'"), set(&[emacs, rome]), "at the change");
    assert_eq!(at("'2026-01-09 23:59:59+00'"), set(&[vim, rome]), "just before the change");
    assert_eq!(at("'2026-01-16 00:00+00'"), set(&[emacs]), "the Rome plan's validity ended on the 15th");
    assert_eq!(at("'2026-01-19 00:00+00'"), set(&[emacs]), "Oslo, deleted later at the user's word, stays forgotten");
    assert_eq!(at("'2025-12-01 00:00+00'"), set(&[]), "before anything was said");
    assert_eq!(at("now()"), set(&[emacs]), "now: the active facts");
    let plain: BTreeSet<i64> =
        recall_ids(&mut c, "SELECT id FROM agent_memory.memory_recall('ann', $1::vector, 50, model => 'm8', touch => false)", &q)
            .into_iter()
            .collect();
    assert_eq!(plain, set(&[emacs]), "without as_of: the active, valid facts");

    // With since: the versions that held then and were said inside the window.
    let got: BTreeSet<i64> = recall_ids(
        &mut c,
        "SELECT id FROM agent_memory.memory_recall('ann', $1::vector, 50, model => 'm8', touch => false,
                                                   since => '2026-01-02 00:00+00', as_of => '2026-01-05 00:00+00')",
        &q,
    )
    .into_iter()
    .collect();
    assert_eq!(got, set(&[rome]));
    // Hybrid and keyword-only calls see the same versions.
    let got: BTreeSet<i64> = recall_ids(
        &mut c,
        "SELECT id FROM agent_memory.memory_recall('ann', $1::vector, 50, model => 'm8', touch => false,
                                                   query_text => 'Ann uses', as_of => '2026-01-05 00:00+00')",
        &q,
    )
    .into_iter()
    .collect();
    assert_eq!(got, set(&[vim, rome]));
    let words: Vec<i64> = c
        .query(
            "SELECT id FROM agent_memory.memory_recall('ann', NULL::vector, 50, model => 'm8', query_text => 'vim emacs',
                                                       as_of => '2026-01-05 00:00+00')",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(words, vec![vim]);

    // memory_context: its long-term channel is as of the moment too.
    let ctx: BTreeSet<i64> = c
        .query(
            "SELECT memory_id FROM agent_memory.memory_context('ann', 's1', $1::vector, k => 50, model => 'm8',
                                                               as_of => '2026-01-05 00:00+00')
              WHERE channel = 'long_term'",
            &[&q],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ctx, set(&[vim, rome]));

    // A look back records no hits (its touch is off); a recall of today does.
    let hits = |c: &mut Client| -> i64 { c.query_one("SELECT sum(hit_count)::bigint FROM agent_memory.memories", &[]).unwrap().get(0) };
    c.query("SELECT * FROM agent_memory.memory_recall('ann', $1::vector, 5, model => 'm8', as_of => '2026-01-05 00:00+00')", &[&q])
        .unwrap();
    c.query("SELECT * FROM agent_memory.memory_context('ann', 's1', $1::vector, model => 'm8', as_of => '2026-01-05 00:00+00')", &[&q])
        .unwrap();
    assert_eq!(hits(&mut c), 0, "as_of recorded hits");
    c.query("SELECT * FROM agent_memory.memory_recall('ann', $1::vector, 5, model => 'm8')", &[&q]).unwrap();
    assert_eq!(hits(&mut c), 1, "a recall of today records its hit");
}

#[test]
fn as_of_follows_reconcile_through_a_change() {
    let mut c = fresh_db("am_it_time_reconcile");
    let q = Vector::from(vec![1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    c.query("SELECT * FROM agent_memory.memory_reconcile('bo', 'bo', 'editor', 'vim', 'Bo uses vim', $1::vector, model => 'm8')", &[&q])
        .unwrap();
    let between: std::time::SystemTime = c.query_one("SELECT clock_timestamp()", &[]).unwrap().get(0);
    let r = c
        .query_one(
            "SELECT action FROM agent_memory.memory_reconcile('bo', 'bo', 'editor', 'helix', 'Bo uses helix', $1::vector, model => 'm8')",
            &[&q],
        )
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "UPDATE");
    let content_at = |c: &mut Client, at: Option<std::time::SystemTime>| -> Vec<String> {
        c.query(
            "SELECT content FROM agent_memory.memory_recall('bo', $1::vector, 5, model => 'm8', touch => false, as_of => $2)",
            &[&q, &at],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    };
    assert_eq!(content_at(&mut c, Some(between)), vec!["Bo uses vim"]);
    assert_eq!(content_at(&mut c, None), vec!["Bo uses helix"]);
    assert_eq!(content_at(&mut c, Some(std::time::SystemTime::now() + std::time::Duration::from_secs(5))), vec!["Bo uses helix"]);
}

#[test]
fn windows_no_memory_can_be_in_are_refused() {
    let mut c = fresh_db("am_it_time_errors");
    let q = Vector::from(vec![1.0f32; DIMS]);
    for (call, what) in [
        ("memory_recall('u', $1::vector, 5, model => 'm8', since => '2026-02-01', until => '2026-01-01')", "since after until"),
        ("memory_recall('u', $1::vector, 5, model => 'm8', since => '2026-01-01', until => '2026-01-01')", "since equal to until"),
        ("memory_recall('u', $1::vector, 5, model => 'm8', since => '2026-02-01', as_of => '2026-01-01')", "as_of before since"),
        ("memory_context('u', 's', $1::vector, model => 'm8', since => '2026-02-01', until => '2026-01-01')", "context: since after until"),
        (
            "memory_context_text('u', 's', $1::vector, model => 'm8', since => '2026-02-01', as_of => '2026-01-01')",
            "context text: as_of before since",
        ),
    ] {
        let err = c.query(&format!("SELECT * FROM agent_memory.{call}"), &[&q]).expect_err(what);
        let db = err.as_db_error().unwrap_or_else(|| panic!("{what}: {err}"));
        assert_eq!(db.code().code(), "22023", "{what}: {}", db.message());
        assert!(db.hint().is_some(), "{what}: no hint");
    }
    // One side, or since equal to as_of, is a window.
    c.query(
        "SELECT * FROM agent_memory.memory_recall('u', $1::vector, 5, model => 'm8', since => '2026-01-01', as_of => '2026-01-01')",
        &[&q],
    )
    .unwrap();
    c.query("SELECT * FROM agent_memory.memory_recall('u', $1::vector, 5, model => 'm8', until => '2026-01-01')", &[&q]).unwrap();
}

#[test]
fn as_of_finds_rows_that_a_touch_or_an_update_rewrote() {
    // A recall's touch (no worker for this database: it updates the rows) and an UPDATE write new
    // versions of the rows, heap-only where the page has room; as_of reads them where they are.
    let mut c = fresh_db("am_it_time_rewritten");
    c.batch_execute(
        "INSERT INTO agent_memory.memories (user_id, content, emb, embedding_model)
         VALUES ('u', 'hello world', '[1,0,0,0,0,0,0,0]', 'm8'), ('u', 'tea time', '[0,1,0,0,0,0,0,0]', 'm8'),
                ('u', 'a long walk', '[0,0,1,0,0,0,0,0]', 'm8')",
    )
    .unwrap();
    let q = Vector::from(vec![1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let touched: Vec<String> = c
        .query("SELECT content FROM agent_memory.memory_recall('u', $1::vector, 1, model => 'm8')", &[&q])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(touched, vec!["hello world"]);
    c.batch_execute("UPDATE agent_memory.memories SET metadata = '{\"x\": 1}' WHERE content = 'a long walk'").unwrap();
    let rewritten: i64 = c.query_one("SELECT count(*) FROM agent_memory.memories WHERE (ctid::text::point)[1] > 3", &[]).unwrap().get(0);
    assert_eq!(rewritten, 2, "the touch and the update wrote new versions");
    for sql in [
        "SELECT content FROM agent_memory.memory_recall('u', $1::vector, 5, model => 'm8', touch => false, as_of => now())",
        "SELECT content FROM agent_memory.memory_recall('u', $1::vector, 5, model => 'm8', touch => false, as_of => now(),
                                                        query_text => 'hello walk tea')",
    ] {
        let mut got: Vec<String> = c.query(sql, &[&q]).unwrap().iter().map(|r| r.get(0)).collect();
        got.sort();
        assert_eq!(got, vec!["a long walk", "hello world", "tea time"], "{sql}");
    }
    let words: Vec<String> = c
        .query(
            "SELECT content FROM agent_memory.memory_recall('u', NULL::vector, 5, model => 'm8', query_text => 'hello', as_of => now())",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(words, vec!["hello world"]);
}
